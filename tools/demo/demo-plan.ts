// What the demo builds and asks, read from a cluster file: a pod (with an echo server) for every
// endpoint, and the requests that exercise each Service's ClusterIPs, NodePorts, external IPs and
// load-balancer IPs. The file is read by the file source's own parser, so the demo sees exactly
// the objects kpng serves; which endpoint may serve is left to kpng, and the demo shows what
// kpng decided.

import { familyOf } from "../../src/model/ip.ts";
import {
  type EndpointSlice,
  LABEL_HEADLESS,
  LABEL_SERVICE_PROXY_NAME,
  type Node,
  type Service,
} from "../../src/model/kube.ts";
import { type ClusterFileContents, parseClusterFile } from "../../src/sources/file/parse.ts";
import type { PodSpec } from "../netns/topology.ts";

/** Where a request is sent from: the client pod inside the cluster, or the external client. */
export type RequestOrigin = "client" | "external";

export interface DemoTarget {
  /** "namespace/name:port-name". */
  readonly service: string;
  /** How the Service is reached: "ClusterIP", "NodePort", "ExternalIP" or "LoadBalancer". */
  readonly via: "ClusterIP" | "NodePort" | "ExternalIP" | "LoadBalancer";
  readonly from: RequestOrigin;
  readonly proto: "tcp" | "udp";
  readonly host: string;
  readonly port: number;
}

export interface DemoPlan {
  readonly nodeIPv4: string | undefined;
  readonly nodeIPv6: string | undefined;
  readonly pods: readonly PodSpec[];
  readonly targets: readonly DemoTarget[];
}

/** The objects of a cluster file, read by the file source's parser; throws on a syntax error. */
export function readClusterFile(text: string, fileName = "cluster file"): ClusterFileContents {
  const parsed = parseClusterFile(text, fileName);
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.contents;
}

/** The demo's pods and requests for the node called nodeName. */
export function planDemo(cluster: ClusterFileContents, nodeName: string): DemoPlan {
  const node = cluster.nodes.find((n) => n.metadata.name === nodeName);
  const internalIPs = node === undefined ? [] : nodeInternalIPs(node);
  const nodeIPv4 = internalIPs.find((ip) => familyOf(ip) === "IPv4");
  const nodeIPv6 = internalIPs.find((ip) => familyOf(ip) === "IPv6");
  const services = cluster.services.filter(isProxied);
  const proxiedNames = new Set(services.map((s) => `${s.metadata.namespace}/${s.metadata.name}`));
  const slices = cluster.endpointSlices.filter((s) =>
    proxiedNames.has(`${s.metadata.namespace}/${s.serviceName}`),
  );
  return {
    nodeIPv4,
    nodeIPv6,
    pods: podsOf(slices),
    targets: services.flatMap((s) => targetsOf(s, nodeIPv4, nodeIPv6)),
  };
}

function isProxied(service: Service): boolean {
  const labels = service.metadata.labels;
  if (labels[LABEL_SERVICE_PROXY_NAME] !== undefined || labels[LABEL_HEADLESS] !== undefined) return false;
  if (service.type === "ExternalName") return false;
  return service.clusterIP !== "" && service.clusterIP !== "None";
}

/** One pod per targetRef (or per address without one), listening on its slices' ports. */
function podsOf(slices: readonly EndpointSlice[]): PodSpec[] {
  const pods = new Map<string, { addresses: Set<string>; tcp: Set<number>; udp: Set<number> }>();
  for (const slice of slices) {
    for (const endpoint of slice.endpoints) {
      const name = endpoint.podName !== "" ? endpoint.podName : (endpoint.addresses[0] ?? "");
      if (name === "" || endpoint.addresses.length === 0) continue;
      const pod = pods.get(name) ?? { addresses: new Set(), tcp: new Set(), udp: new Set() };
      pods.set(name, pod);
      for (const a of endpoint.addresses) pod.addresses.add(a);
      for (const p of slice.ports) {
        if (p.port === null) continue;
        if (p.protocol === "TCP") pod.tcp.add(p.port);
        if (p.protocol === "UDP") pod.udp.add(p.port);
      }
    }
  }
  return [...pods].map(([name, p]) => ({
    name,
    addresses: [...p.addresses],
    echo: { tcpPorts: [...p.tcp].sort((a, b) => a - b), udpPorts: [...p.udp].sort((a, b) => a - b) },
  }));
}

function targetsOf(
  service: Service,
  nodeIPv4: string | undefined,
  nodeIPv6: string | undefined,
): DemoTarget[] {
  const { namespace, name } = service.metadata;
  const clusterIPs = service.clusterIPs.length > 0 ? service.clusterIPs : [service.clusterIP];
  const families = new Set(clusterIPs.map(familyOf));
  const nodeIPs = [
    families.has("IPv4") ? nodeIPv4 : undefined,
    families.has("IPv6") ? nodeIPv6 : undefined,
  ].filter((ip): ip is string => ip !== undefined);
  const lbIPs = service.loadBalancerIngress
    .filter((i) => i.ipMode !== "Proxy" && i.ip !== "")
    .map((i) => i.ip);
  const targets: DemoTarget[] = [];
  for (const port of service.ports) {
    const proto = port.protocol === "UDP" ? "udp" : port.protocol === "TCP" ? "tcp" : undefined;
    if (proto === undefined) continue;
    const svc = `${namespace}/${name}${port.name !== "" ? `:${port.name}` : ""}`;
    const add = (via: DemoTarget["via"], from: RequestOrigin, host: string, p: number): void => {
      targets.push({ service: svc, via, from, proto, host, port: p });
    };
    for (const ip of clusterIPs) add("ClusterIP", "client", ip, port.port);
    if ((service.type === "NodePort" || service.type === "LoadBalancer") && port.nodePort > 0) {
      for (const ip of nodeIPs) add("NodePort", "external", ip, port.nodePort);
    }
    for (const ip of service.externalIPs) add("ExternalIP", "external", ip, port.port);
    if (service.type === "LoadBalancer")
      for (const ip of lbIPs) add("LoadBalancer", "external", ip, port.port);
  }
  return targets;
}

function nodeInternalIPs(node: Node): string[] {
  return node.addresses.filter((a) => a.type === "InternalIP").map((a) => a.address);
}
