// Builds the cluster file the backend contract suite feeds to `kpng file … to-local <backend>`: Kubernetes objects
// as JSON documents (valid YAML), written atomically so the file source sees whole files only.

import { renameSync, writeFileSync } from "node:fs";

export interface TestEndpoint {
  readonly ip: string;
  readonly node: string;
  readonly ready?: boolean;
  readonly serving?: boolean;
  readonly terminating?: boolean;
}

export interface TestPort {
  readonly name: string;
  readonly protocol?: "TCP" | "UDP" | "SCTP";
  readonly port: number;
  readonly targetPort: number;
  readonly nodePort?: number;
}

export interface TestService {
  readonly name: string;
  readonly type?: "ClusterIP" | "NodePort" | "LoadBalancer";
  readonly clusterIP: string;
  readonly ports: readonly TestPort[];
  readonly endpoints: readonly TestEndpoint[];
  readonly externalIPs?: readonly string[];
  readonly loadBalancerIP?: string;
  readonly sourceRanges?: readonly string[];
  readonly affinitySeconds?: number;
  readonly externalTrafficPolicy?: "Cluster" | "Local";
  readonly internalTrafficPolicy?: "Cluster" | "Local";
  readonly healthCheckNodePort?: number;
  /** The service.kubernetes.io/service-proxy-name label of the Service and its slice. */
  readonly proxyName?: string;
}

export interface ClusterOptions {
  /** Puts the cluster autoscaler's ToBeDeletedByClusterAutoscaler taint on node-1. */
  readonly node1ToBeDeleted?: boolean;
  /** More objects for the file, e.g. ServiceCIDRs. */
  readonly others?: readonly object[];
  /** node-1's spec.podCIDRs. */
  readonly node1PodCIDRs?: readonly string[];
}

function node(
  name: string,
  ipv4: string,
  ipv6: string,
  toBeDeleted = false,
  podCIDRs?: readonly string[],
): object {
  const taints = toBeDeleted
    ? { taints: [{ key: "ToBeDeletedByClusterAutoscaler", value: "1", effect: "NoSchedule" }] }
    : {};
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, labels: { "kubernetes.io/hostname": name } },
    spec: { ...taints, ...(podCIDRs && { podCIDRs }) },
    status: {
      addresses: [
        { type: "InternalIP", address: ipv4 },
        { type: "InternalIP", address: ipv6 },
      ],
    },
  };
}

function proxyLabel(s: TestService): Record<string, string> {
  return s.proxyName === undefined ? {} : { "service.kubernetes.io/service-proxy-name": s.proxyName };
}

function serviceObjects(s: TestService): object[] {
  const v6 = s.clusterIP.includes(":");
  const family = v6 ? "IPv6" : "IPv4";
  const type = s.type ?? "ClusterIP";
  const svc = {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: s.name, namespace: "default", labels: proxyLabel(s) },
    spec: {
      type,
      clusterIP: s.clusterIP,
      clusterIPs: [s.clusterIP],
      ipFamilies: [family],
      ports: s.ports.map((p) => ({
        name: p.name,
        protocol: p.protocol ?? "TCP",
        port: p.port,
        targetPort: p.targetPort,
        ...(p.nodePort ? { nodePort: p.nodePort } : {}),
      })),
      ...(s.externalIPs ? { externalIPs: s.externalIPs } : {}),
      ...(s.sourceRanges ? { loadBalancerSourceRanges: s.sourceRanges } : {}),
      ...(s.affinitySeconds
        ? {
            sessionAffinity: "ClientIP",
            sessionAffinityConfig: { clientIP: { timeoutSeconds: s.affinitySeconds } },
          }
        : {}),
      ...(type !== "ClusterIP" ? { externalTrafficPolicy: s.externalTrafficPolicy ?? "Cluster" } : {}),
      internalTrafficPolicy: s.internalTrafficPolicy ?? "Cluster",
      ...(s.healthCheckNodePort ? { healthCheckNodePort: s.healthCheckNodePort } : {}),
    },
    status: s.loadBalancerIP ? { loadBalancer: { ingress: [{ ip: s.loadBalancerIP }] } } : {},
  };
  const slice = {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `${s.name}-1`,
      namespace: "default",
      labels: { "kubernetes.io/service-name": s.name, ...proxyLabel(s) },
    },
    addressType: family,
    endpoints: s.endpoints.map((e) => ({
      addresses: [e.ip],
      nodeName: e.node,
      conditions: { ready: e.ready ?? true, serving: e.serving ?? true, terminating: e.terminating ?? false },
    })),
    ports: s.ports.map((p) => ({ name: p.name, protocol: p.protocol ?? "TCP", port: p.targetPort })),
  };
  return [svc, slice];
}

/**
 * The command line of kpng reading the cluster file `file` as node-1 and programming it with
 * `sink` (a backend's sink and flags), syncs 100 ms apart at most; `extra` goes before that flag.
 */
export function kpngArgv(
  main: string,
  file: string,
  sink: readonly string[],
  extra: readonly string[] = [],
): string[] {
  return [
    process.execPath,
    main,
    "file",
    "--input",
    file,
    "to-local",
    ...sink,
    "--node-name",
    "node-1",
    "--nodeport-addresses",
    "192.0.2.1/32,2001:db8::1/128",
    ...extra,
    "--min-sync-period",
    "100ms",
  ];
}

/** A networking.k8s.io/v1 ServiceCIDR: one of the cluster's Service IP ranges. */
export function serviceCIDR(name: string, cidrs: readonly string[]): object {
  return { apiVersion: "networking.k8s.io/v1", kind: "ServiceCIDR", metadata: { name }, spec: { cidrs } };
}

/** Writes the cluster (two nodes, the services and any other objects) to path, atomically. */
export function writeCluster(
  path: string,
  services: readonly TestService[],
  opts: ClusterOptions = {},
): void {
  const docs = [
    node("node-1", "192.0.2.1", "2001:db8::1", opts.node1ToBeDeleted, opts.node1PodCIDRs),
    node("node-2", "192.0.2.50", "2001:db8::50"),
    ...services.flatMap(serviceObjects),
    ...(opts.others ?? []),
  ];
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, docs.map((d) => JSON.stringify(d)).join("\n---\n"));
  renameSync(tmp, path);
}
