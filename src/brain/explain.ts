// `kpng explain`: one Service as one node sees it, every endpoint with whether the node uses it
// and why. The answers come from the brain's own functions (slicesInEffect, mergeEndpoints,
// portTraffic, categorizeEndpoints and its companion endpointReason), so an explanation cannot
// disagree with what the node programs.

import { isFallbackSlice } from "../model/fallback.ts";
import { familyOf, familyOfAddress } from "../model/ip.ts";
import {
  type EndpointSlice,
  type IPFamily,
  LABEL_SERVICE_PROXY_NAME,
  LABEL_ZONE,
  type Node,
  type Protocol,
  type Service,
  type ServicePort,
} from "../model/kube.ts";
import { endpointString } from "../model/local.ts";
import { categorizeEndpoints, type EndpointReasonCode, endpointReason } from "./categorize.ts";
import { type EndpointInfo, endpointsOfPort, mergeEndpoints } from "./endpoint-merge.ts";
import { slicesInEffect } from "./fallback.ts";
import { portTraffic } from "./local-service.ts";
import { selectedByProxyName } from "./selection.ts";
import {
  clusterIPForFamily,
  externalIPsForFamily,
  loadBalancerIPsForFamily,
  servedFamilies,
} from "./service-ips.ts";

export type TrafficKind = "cluster-ip" | "node-port" | "external-ip" | "load-balancer";

/** balance: over the used endpoints; reject: ICMP unreachable; drop: silently; none: not proxied at all. */
export type Verdict = "balance" | "reject" | "drop" | "none";

export type ReasonCode =
  | EndpointReasonCode
  | "fallback-active"
  | "fallback-inactive"
  | "no-address-of-family"
  | "proxy-name-not-served"
  | "headless"
  | "external-name";

interface EndpointExplanation {
  readonly ip: string;
  readonly port: number;
  /** The endpoint's nodeName ("" when the slice names none). */
  readonly node: string;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  readonly used: boolean;
  readonly code: ReasonCode;
  readonly reason: string;
}

interface KindExplanation {
  readonly kind: TrafficKind;
  /** "ip:port" this traffic arrives on; node ports list the Node's addresses ("*" when unknown). */
  readonly addresses: readonly string[];
  /** The traffic policy that applies to this kind of traffic. */
  readonly trafficPolicy: "Cluster" | "Local";
  readonly endpoints: readonly EndpointExplanation[];
  readonly verdict: Verdict;
}

interface PortExplanation {
  readonly name: string;
  readonly protocol: Protocol;
  readonly port: number;
  readonly kinds: readonly KindExplanation[];
}

export interface ServiceExplanation {
  readonly service: string;
  readonly node: string;
  readonly type: Service["type"];
  /** Whether this node's proxy programs the Service at all. */
  readonly proxied: boolean;
  /** Why not, when not proxied; otherwise notes about the whole Service. */
  readonly notes: readonly string[];
  readonly sessionAffinity: { readonly type: "None" | "ClientIP"; readonly timeoutSeconds: number };
  readonly internalTrafficPolicy: "Cluster" | "Local";
  readonly externalTrafficPolicy: "Cluster" | "Local";
  readonly ports: readonly PortExplanation[];
}

/** What explainService reads of the cluster. */
interface ExplainInput {
  readonly service: Service;
  readonly slices: readonly EndpointSlice[];
  /** The node as the cluster knows it; undefined when no Node object of that name exists. */
  readonly node: Node | undefined;
  readonly nodeName: string;
  /** The service proxy names this node's proxy serves ("" is the unlabelled Services). */
  readonly servedProxyNames: readonly string[];
}

const TRAFFIC_WORDS: Readonly<Record<TrafficKind, string>> = {
  "cluster-ip": "internalTrafficPolicy",
  "node-port": "externalTrafficPolicy",
  "external-ip": "externalTrafficPolicy",
  "load-balancer": "externalTrafficPolicy",
};

/** The words of the Kubernetes docs for each reason. */
function reasonText(
  code: ReasonCode,
  detail: { kind?: TrafficKind; family?: IPFamily; label?: string },
): string {
  switch (code) {
    case "ready":
      return "ready";
    case "serving-terminating-fallback":
      return "terminating but still serving: used because no endpoint is ready (serving-terminating fallback)";
    case "terminating-while-others-ready":
      return "terminating: used only while no endpoint is ready";
    case "not-ready":
      return "not ready";
    case "not-serving":
      return "not serving (not ready and not serving)";
    case "other-node-local-policy":
      return `on another node, and ${TRAFFIC_WORDS[detail.kind ?? "cluster-ip"]} is Local`;
    case "topology-other-zone":
      return "topology hints send this zone's traffic to other endpoints (hint for another zone)";
    case "topology-other-node":
      return "topology hints send this node's traffic to other endpoints (hint for another node)";
    case "fallback-active":
      return "the fallback selector is active: the Service's own EndpointSlices are set aside";
    case "fallback-inactive":
      return "fallback EndpointSlice, not active: used only while the Service's own pods are not ready";
    case "no-address-of-family":
      return `${detail.family ?? "this family"} endpoint, but the Service has no ${detail.family ?? ""} address for this traffic`;
    case "proxy-name-not-served":
      return detail.label === undefined
        ? "the Service has no service.kubernetes.io/service-proxy-name label and this proxy serves only labelled ones"
        : `labelled service.kubernetes.io/service-proxy-name=${detail.label}: left to that proxy`;
    case "headless":
      return "headless Service (clusterIP: None): no virtual IP, clients reach the pods through DNS";
    case "external-name":
      return "ExternalName Service: a DNS alias, nothing is proxied";
  }
}

/** One Service as the node `nodeName` sees it. */
export function explainService(input: ExplainInput): ServiceExplanation {
  const { service } = input;
  const serviceLevel = notProxiedBecause(input);
  const base = {
    service: `${service.metadata.namespace}/${service.metadata.name}`,
    node: input.nodeName,
    type: service.type,
    sessionAffinity: {
      type: service.sessionAffinity,
      timeoutSeconds: service.sessionAffinity === "ClientIP" ? service.sessionAffinityTimeoutSeconds : 0,
    },
    internalTrafficPolicy: service.internalTrafficPolicy,
    externalTrafficPolicy: service.externalTrafficPolicy,
  };
  if (serviceLevel !== undefined) {
    const reason = reasonText(serviceLevel, { label: service.metadata.labels[LABEL_SERVICE_PROXY_NAME] });
    return {
      ...base,
      proxied: false,
      notes: [reason],
      ports: service.ports.map((port) => notProxiedPort(port, input.slices, serviceLevel, reason)),
    };
  }
  const notes: string[] = [];
  if (input.node === undefined) notes.push(`no Node object named ${input.nodeName}: its zone is unknown`);
  if (slicesInEffect(input.slices).some(isFallbackSlice)) notes.push(reasonText("fallback-active", {}));
  return { ...base, proxied: true, notes, ports: service.ports.map((port) => explainPort(input, port)) };
}

function notProxiedBecause(input: ExplainInput): ReasonCode | undefined {
  const { service } = input;
  if (!input.servedProxyNames.some((name) => selectedByProxyName(service.metadata.labels, name)))
    return "proxy-name-not-served";
  if (service.type === "ExternalName") return "external-name";
  if (service.clusterIP === "" || service.clusterIP === "None" || servedFamilies(service).length === 0)
    return "headless";
  return undefined;
}

const FAMILIES: readonly IPFamily[] = ["IPv4", "IPv6"];

function notProxiedPort(
  port: ServicePort,
  slices: readonly EndpointSlice[],
  code: ReasonCode,
  reason: string,
): PortExplanation {
  const endpoints = FAMILIES.flatMap((family) => endpointsOfPort(mergeEndpoints(slices, family), port)).map(
    (ep) => explained(ep, false, code, reason),
  );
  return {
    name: port.name,
    protocol: port.protocol,
    port: port.port,
    kinds: [{ kind: "cluster-ip", addresses: [], trafficPolicy: "Cluster", endpoints, verdict: "none" }],
  };
}

function explained(ep: EndpointInfo, used: boolean, code: ReasonCode, reason: string): EndpointExplanation {
  return {
    ip: ep.ip,
    port: ep.port,
    node: ep.nodeName,
    ready: ep.ready,
    serving: ep.serving,
    terminating: ep.terminating,
    used,
    code,
    reason,
  };
}

/** The addresses of one kind of traffic in one family, as "ip:port". */
function kindAddresses(
  kind: TrafficKind,
  service: Service,
  port: ServicePort,
  family: IPFamily,
  node: Node | undefined,
): string[] {
  const at = (ips: readonly string[], p: number) => ips.map((ip) => endpointString({ ip, port: p }));
  switch (kind) {
    case "cluster-ip":
      return at([clusterIPForFamily(service, family)], port.port);
    case "external-ip":
      return at(externalIPsForFamily(service, family), port.port);
    case "load-balancer":
      return at(loadBalancerIPsForFamily(service, family), port.port);
    case "node-port": {
      if (port.nodePort === 0) return [];
      if (node === undefined) return family === servedFamilies(service)[0] ? [`*:${port.nodePort}`] : [];
      const ips = node.addresses
        .filter((a) => a.type === "InternalIP" || a.type === "ExternalIP")
        .map((a) => a.address)
        .filter((ip) => familyOf(ip) === family);
      return at(ips, port.nodePort);
    }
  }
}

function explainPort(input: ExplainInput, port: ServicePort): PortExplanation {
  const { service } = input;
  const kinds: KindExplanation[] = [];
  for (const kind of ["cluster-ip", "node-port", "external-ip", "load-balancer"] as const) {
    const families = servedFamilies(service);
    const addresses = families.flatMap((f) => kindAddresses(kind, service, port, f, input.node));
    const present =
      kind === "cluster-ip" ||
      (kind === "node-port" && port.nodePort !== 0) ||
      (kind !== "node-port" && addresses.length > 0);
    if (present) kinds.push(explainKind(input, port, kind, addresses));
  }
  return { name: port.name, protocol: port.protocol, port: port.port, kinds };
}

function explainKind(
  input: ExplainInput,
  port: ServicePort,
  kind: TrafficKind,
  addresses: readonly string[],
): KindExplanation {
  const { service, nodeName } = input;
  const zone = input.node?.metadata.labels[LABEL_ZONE] ?? "";
  const inEffect = slicesInEffect(input.slices);
  const served = servedFamilies(service);
  const out: EndpointExplanation[] = [];
  const seen = new Set<string>();
  let anyEndpoints = false;
  let local = false;
  for (const family of served) {
    const view = {
      externalIPs: externalIPsForFamily(service, family),
      loadBalancerIPs: loadBalancerIPsForFamily(service, family),
    };
    const traffic = portTraffic(service, port, view);
    const endpoints = endpointsOfPort(mergeEndpoints(inEffect, family), port);
    const hasAddress =
      kind === "cluster-ip" ||
      kind === "node-port" ||
      kindAddresses(kind, service, port, family, undefined).length > 0;
    if (!hasAddress) {
      for (const ep of endpoints) {
        out.push(
          explained(ep, false, "no-address-of-family", reasonText("no-address-of-family", { family })),
        );
        seen.add(endpointString(ep));
      }
      continue;
    }
    const categorized = categorizeEndpoints(endpoints, traffic.policy, nodeName, zone);
    local = kind === "cluster-ip" ? traffic.internalLocal : traffic.externalLocal;
    const chosen = local ? categorized.localEndpoints : categorized.clusterEndpoints;
    if (categorized.hasAnyEndpoints) anyEndpoints = true;
    for (const ep of endpoints) {
      const { used, code } = endpointReason(ep, chosen, local, endpoints, nodeName, zone);
      out.push(explained(ep, used, code, reasonText(code, { kind })));
      seen.add(endpointString(ep));
    }
  }
  // Endpoints the brain never reads for this traffic: other families, slices set aside.
  for (const family of FAMILIES) {
    if (!served.includes(family)) {
      for (const ep of endpointsOfPort(mergeEndpoints(inEffect, family), port)) {
        if (seen.has(endpointString(ep))) continue;
        out.push(
          explained(ep, false, "no-address-of-family", reasonText("no-address-of-family", { family })),
        );
        seen.add(endpointString(ep));
      }
    }
    const setAside = input.slices.filter((slice) => !inEffect.includes(slice));
    for (const slice of setAside) {
      const code = isFallbackSlice(slice) ? "fallback-inactive" : "fallback-active";
      for (const ep of endpointsOfPort(mergeEndpoints([slice], family), port)) {
        if (seen.has(endpointString(ep))) continue;
        out.push(explained(ep, false, code, reasonText(code, {})));
        seen.add(endpointString(ep));
      }
    }
  }
  const verdict: Verdict = out.some((ep) => ep.used) ? "balance" : anyEndpoints ? "drop" : "reject";
  return { kind, addresses, trafficPolicy: local ? "Local" : "Cluster", endpoints: out, verdict };
}

/** A destination `kpng explain IP:PORT[/PROTOCOL]` asks about. */
export interface AddressQuery {
  readonly ip: string;
  readonly port: number;
  /** undefined: any protocol. */
  readonly protocol: Protocol | undefined;
}

/** Parses "IP:PORT", "[IPv6]:PORT", with an optional "/TCP" (UDP, SCTP); undefined when it is not one. */
export function parseAddressQuery(text: string): AddressQuery | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+)):(\d{1,5})(?:\/(tcp|udp|sctp))?$/i.exec(text.trim());
  if (m === null) return undefined;
  const ip = (m[1] ?? m[2] ?? "").toLowerCase();
  const port = Number(m[3]);
  if (familyOfAddress(ip) === undefined || port < 1 || port > 65535) return undefined;
  const protocol = m[4] === undefined ? undefined : (m[4].toUpperCase() as Protocol);
  return { ip, port, protocol };
}

/**
 * Keeps only the ports and kinds of traffic that take packets to `query`; undefined when none
 * does. Node ports match an address of the node (any address when the node is unknown).
 */
export function narrowToAddress(
  explanation: ServiceExplanation,
  query: AddressQuery,
): ServiceExplanation | undefined {
  const target = endpointString(query);
  const ports: PortExplanation[] = [];
  for (const port of explanation.ports) {
    if (query.protocol !== undefined && port.protocol !== query.protocol) continue;
    const kinds = port.kinds.filter(
      (k) =>
        k.addresses.includes(target) || (k.kind === "node-port" && k.addresses.includes(`*:${query.port}`)),
    );
    if (kinds.length > 0) ports.push({ ...port, kinds });
  }
  return ports.length === 0 ? undefined : { ...explanation, ports };
}
