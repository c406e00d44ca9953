// Builders of validated model objects for the brain's tests: a row states only what it is about.

import type {
  AddressType,
  EndpointPort,
  EndpointSlice,
  Labels,
  Node,
  Service,
  ServicePort,
  SliceEndpoint,
} from "../../../src/model/kube.ts";
import { endpointString, type LocalService } from "../../../src/model/local.ts";

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export interface ServiceInput extends Partial<Omit<Service, "metadata" | "ports">> {
  readonly name?: string;
  readonly namespace?: string;
  readonly labels?: Labels;
  readonly annotations?: Labels;
  readonly resourceVersion?: string;
  readonly ports?: readonly Partial<ServicePort>[];
}

/** A ClusterIP service "ns/web" at 198.51.100.10 with one TCP port "http" 80. */
export function svc(input: ServiceInput = {}): Service {
  const {
    name = "web",
    namespace = "ns",
    labels = {},
    annotations = {},
    resourceVersion = "1",
    ports,
    ...spec
  } = input;
  const base: Mutable<Service> = {
    kind: "Service",
    metadata: { namespace, name, uid: `uid-${name}`, resourceVersion, labels, annotations },
    type: "ClusterIP",
    clusterIP: "198.51.100.10",
    clusterIPs: ["198.51.100.10"],
    ipFamilies: ["IPv4"],
    externalIPs: [],
    loadBalancerSourceRanges: [],
    loadBalancerIngress: [],
    sessionAffinity: "None",
    sessionAffinityTimeoutSeconds: 0,
    externalTrafficPolicy: "Cluster",
    internalTrafficPolicy: "Cluster",
    healthCheckNodePort: 0,
    ports: (ports ?? [{}]).map((p) => ({
      name: "http",
      protocol: "TCP",
      port: 80,
      nodePort: 0,
      targetPort: 8080,
      ...p,
    })),
  };
  return { ...base, ...spec };
}

/** Dual-stack: IPv4 primary at 198.51.100.10, IPv6 at 2001:db8::10. */
export function dualStack(input: ServiceInput = {}): Service {
  return svc({ clusterIPs: ["198.51.100.10", "2001:db8::10"], ipFamilies: ["IPv4", "IPv6"], ...input });
}

export interface EndpointInput {
  readonly node?: string;
  readonly ready?: boolean | null;
  readonly serving?: boolean | null;
  readonly terminating?: boolean | null;
  readonly zone?: string;
  readonly zoneHints?: readonly string[];
  readonly nodeHints?: readonly string[];
  readonly addresses?: readonly string[];
}

/** A ready endpoint on node n2 (not this node, which is n1). */
export function ep(ip: string, input: EndpointInput = {}): SliceEndpoint {
  return {
    addresses: input.addresses ?? [ip],
    conditions: {
      ready: input.ready ?? true,
      serving: input.serving ?? true,
      terminating: input.terminating ?? false,
    },
    hostname: "",
    nodeName: input.node ?? "n2",
    zone: input.zone ?? "",
    zoneHints: input.zoneHints ?? [],
    nodeHints: input.nodeHints ?? [],
    podName: "",
  };
}

/** Terminating and still serving (not ready), as the EndpointSlice controller writes it. */
export function terminating(ip: string, input: EndpointInput = {}): SliceEndpoint {
  return ep(ip, { ready: false, serving: true, terminating: true, ...input });
}

export interface SliceInput {
  readonly name?: string;
  readonly namespace?: string;
  readonly service?: string;
  readonly addressType?: AddressType;
  readonly ports?: readonly EndpointPort[];
  readonly labels?: Labels;
  readonly resourceVersion?: string;
}

/** A slice of service ns/web with port "http" TCP 8080. */
export function slice(endpoints: readonly SliceEndpoint[], input: SliceInput = {}): EndpointSlice {
  const service = input.service ?? "web";
  const labels: Labels = input.labels ?? { "kubernetes.io/service-name": service };
  return {
    kind: "EndpointSlice",
    metadata: {
      namespace: input.namespace ?? "ns",
      name: input.name ?? `${service}-${input.addressType ?? "IPv4"}`,
      uid: "",
      resourceVersion: input.resourceVersion ?? "1",
      labels,
      annotations: {},
    },
    addressType: input.addressType ?? (endpoints[0]?.addresses[0]?.includes(":") ? "IPv6" : "IPv4"),
    serviceName: labels["kubernetes.io/service-name"] ?? "",
    ports: input.ports ?? [{ name: "http", protocol: "TCP", port: 8080 }],
    endpoints,
  };
}

export function node(name: string, labels: Labels = {}): Node {
  return {
    kind: "Node",
    metadata: { namespace: "", name, uid: "", resourceVersion: "1", labels, annotations: {} },
    addresses: [],
    podCIDRs: [],
  };
}

export const THIS_NODE = { name: "n1", labels: { "topology.kubernetes.io/zone": "z1" } };

/** A port's endpoints as "ip:port" strings, with "(local)" marking this node's. */
export function endpointsOf(
  service: LocalService | undefined,
  which: "internal" | "external",
  port = 0,
): string[] {
  const p = service?.ports[port];
  if (p === undefined) throw new Error(`no port ${port}`);
  const list = which === "internal" ? p.internalEndpoints : p.externalEndpoints;
  return list.map((e) => endpointString(e) + (e.local ? " (local)" : ""));
}
