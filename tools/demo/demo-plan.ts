// What the demo builds and asks, read from a cluster file: a pod (with an echo server) for every
// endpoint, and the requests that exercise each Service's ClusterIPs, NodePorts, external IPs and
// load-balancer IPs. This reads the YAML loosely on purpose: deciding which endpoint may serve
// is kpng's job, and the demo shows what kpng decided.

import { parseAllDocuments } from "yaml";
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

type Obj = Record<string, unknown>;

const LABEL_PROXY_NAME = "service.kubernetes.io/service-proxy-name";
const LABEL_HEADLESS = "service.kubernetes.io/headless";

/** Parses a multi-document YAML (or JSON) cluster file into kube objects (`kind: List` unfolded). */
export function parseClusterFile(text: string): Obj[] {
  const objects: Obj[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`cluster file: ${doc.errors[0]?.message}`);
    const value = doc.toJS() as unknown;
    if (!isObj(value)) continue;
    if (value.kind === "List" && Array.isArray(value.items)) objects.push(...value.items.filter(isObj));
    else objects.push(value);
  }
  return objects;
}

/** The demo's pods and requests for the node called nodeName. */
export function planDemo(objects: readonly Obj[], nodeName: string): DemoPlan {
  const node = objects.find((o) => o.kind === "Node" && meta(o).name === nodeName);
  const internalIPs = node === undefined ? [] : nodeInternalIPs(node);
  const nodeIPv4 = internalIPs.find((ip) => !ip.includes(":"));
  const nodeIPv6 = internalIPs.find((ip) => ip.includes(":"));
  const services = objects.filter((o) => o.kind === "Service" && isProxied(o));
  const proxiedNames = new Set(services.map((s) => `${meta(s).namespace}/${meta(s).name}`));
  const slices = objects.filter(
    (o) =>
      o.kind === "EndpointSlice" &&
      proxiedNames.has(`${meta(o).namespace}/${meta(o).labels["kubernetes.io/service-name"] ?? ""}`),
  );
  return {
    nodeIPv4,
    nodeIPv6,
    pods: podsOf(slices),
    targets: services.flatMap((s) => targetsOf(s, nodeIPv4, nodeIPv6)),
  };
}

function isProxied(service: Obj): boolean {
  const spec = obj(service.spec);
  const labels = meta(service).labels;
  if (labels[LABEL_PROXY_NAME] !== undefined || labels[LABEL_HEADLESS] !== undefined) return false;
  if (spec.type === "ExternalName") return false;
  return typeof spec.clusterIP === "string" && spec.clusterIP !== "" && spec.clusterIP !== "None";
}

/** One pod per targetRef (or per address without one), listening on its slices' ports. */
function podsOf(slices: readonly Obj[]): PodSpec[] {
  const pods = new Map<string, { addresses: Set<string>; tcp: Set<number>; udp: Set<number> }>();
  for (const slice of slices) {
    const ports = list(slice.ports).map(obj);
    for (const endpoint of list(slice.endpoints).map(obj)) {
      const addresses = list(endpoint.addresses).filter((a): a is string => typeof a === "string");
      const ref = obj(endpoint.targetRef);
      const name = typeof ref.name === "string" && ref.name !== "" ? ref.name : (addresses[0] ?? "");
      if (name === "" || addresses.length === 0) continue;
      const pod = pods.get(name) ?? { addresses: new Set(), tcp: new Set(), udp: new Set() };
      pods.set(name, pod);
      for (const a of addresses) pod.addresses.add(a);
      for (const p of ports) {
        if (typeof p.port !== "number") continue;
        if ((p.protocol ?? "TCP") === "TCP") pod.tcp.add(p.port);
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

function targetsOf(service: Obj, nodeIPv4: string | undefined, nodeIPv6: string | undefined): DemoTarget[] {
  const spec = obj(service.spec);
  const { namespace, name } = meta(service);
  const clusterIPs =
    strings(spec.clusterIPs).length > 0 ? strings(spec.clusterIPs) : strings([spec.clusterIP]);
  const families = new Set(clusterIPs.map((ip) => (ip.includes(":") ? 6 : 4)));
  const nodeIPs = [families.has(4) ? nodeIPv4 : undefined, families.has(6) ? nodeIPv6 : undefined].filter(
    (ip): ip is string => ip !== undefined,
  );
  const lbIPs = list(obj(obj(service.status).loadBalancer).ingress)
    .map(obj)
    .filter((i) => i.ipMode !== "Proxy" && typeof i.ip === "string")
    .map((i) => i.ip as string);
  const type = spec.type ?? "ClusterIP";
  const targets: DemoTarget[] = [];
  for (const port of list(spec.ports).map(obj)) {
    const proto = port.protocol === "UDP" ? "udp" : (port.protocol ?? "TCP") === "TCP" ? "tcp" : undefined;
    if (proto === undefined || typeof port.port !== "number") continue;
    const svc = `${namespace}/${name}${typeof port.name === "string" && port.name !== "" ? `:${port.name}` : ""}`;
    const add = (via: DemoTarget["via"], from: RequestOrigin, host: string, p: number): void => {
      targets.push({ service: svc, via, from, proto, host, port: p });
    };
    for (const ip of clusterIPs) add("ClusterIP", "client", ip, port.port);
    const nodePort = typeof port.nodePort === "number" ? port.nodePort : 0;
    if ((type === "NodePort" || type === "LoadBalancer") && nodePort > 0) {
      for (const ip of nodeIPs) add("NodePort", "external", ip, nodePort);
    }
    for (const ip of strings(spec.externalIPs)) add("ExternalIP", "external", ip, port.port);
    if (type === "LoadBalancer") for (const ip of lbIPs) add("LoadBalancer", "external", ip, port.port);
  }
  return targets;
}

function nodeInternalIPs(node: Obj): string[] {
  return list(obj(node.status).addresses)
    .map(obj)
    .filter((a) => a.type === "InternalIP" && typeof a.address === "string")
    .map((a) => a.address as string);
}

function meta(o: Obj): { namespace: string; name: string; labels: Record<string, string> } {
  const m = obj(o.metadata);
  return {
    namespace: typeof m.namespace === "string" && m.namespace !== "" ? m.namespace : "default",
    name: typeof m.name === "string" ? m.name : "",
    labels: obj(m.labels) as Record<string, string>,
  };
}

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function obj(v: unknown): Obj {
  return isObj(v) ? v : {};
}

function list(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

function strings(v: unknown): string[] {
  return list(v).filter((s): s is string => typeof s === "string" && s !== "" && s !== "None");
}
