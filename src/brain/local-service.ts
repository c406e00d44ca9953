// One Service and its EndpointSlices → what this node programs for it. Each family is computed
// on its own, as kube-proxy runs one proxier per family: the addresses and the endpoints stay per
// family, and a port's flat endpoint lists join its families' lists.

import type { EndpointSlice } from "../model/kube.ts";
import { type IPFamily, LABEL_ZONE, type Labels, type Service, type ServicePort } from "../model/kube.ts";
import type { LocalEndpoint, LocalService, LocalServiceFamily, LocalServicePort } from "../model/local.ts";
import { PackedEndpoint } from "../model/packed-endpoint.ts";
import { categorizeEndpoints, isLocal, type PortPolicy } from "./categorize.ts";
import { type EndpointInfo, endpointsOfPort, mergeEndpoints, type PortEndpoints } from "./endpoint-merge.ts";
import { slicesInEffect } from "./fallback.ts";
import {
  externalIPsForFamily,
  loadBalancerIPsForFamily,
  servedClusterIPs,
  sourceRangesForFamily,
} from "./service-ips.ts";

export interface NodeView {
  readonly name: string;
  readonly labels: Labels;
}

/** What one family contributes to a service: its addresses and its merged endpoints. */
export interface FamilyView {
  readonly addresses: LocalServiceFamily;
  readonly endpoints: readonly PortEndpoints[];
}

/** Externally accessible services: NodePort, LoadBalancer, or any with external IPs. */
function externallyAccessible(service: Service): boolean {
  return service.type === "NodePort" || service.type === "LoadBalancer" || service.externalIPs.length > 0;
}

/** How one port of one family takes traffic: which policies apply and what categorizeEndpoints must compute. */
interface PortTraffic {
  /** internalTrafficPolicy Local: cluster-IP traffic goes to this node's endpoints only. */
  readonly internalLocal: boolean;
  /** externalTrafficPolicy Local on an externally accessible service. */
  readonly externalLocal: boolean;
  /** The port takes traffic from outside: a node port, a load-balancer IP or an external IP. */
  readonly portExternal: boolean;
  readonly policy: PortPolicy;
}

export function portTraffic(
  service: Service,
  port: ServicePort,
  view: { readonly externalIPs: readonly string[]; readonly loadBalancerIPs: readonly string[] },
): PortTraffic {
  const internalLocal = service.internalTrafficPolicy === "Local";
  const externalLocal = externallyAccessible(service) && service.externalTrafficPolicy === "Local";
  const portExternal = port.nodePort !== 0 || view.loadBalancerIPs.length > 0 || view.externalIPs.length > 0;
  return {
    internalLocal,
    externalLocal,
    portExternal,
    policy: {
      usesCluster: !internalLocal || portExternal,
      usesLocal: internalLocal || (externalLocal && portExternal),
    },
  };
}

/**
 * What a node makes of an endpoint depends only on whether the endpoint runs on it: the two
 * objects are kept on the endpoint and shared by every node's computation.
 */
function toLocal(ep: EndpointInfo, nodeName: string): LocalEndpoint {
  const local = isLocal(ep, nodeName);
  const known = local ? ep.onItsNode : ep.elsewhere;
  if (known !== undefined) return known;
  const { ip, port, ready, serving, terminating } = ep;
  const made = new PackedEndpoint(ip, port, {
    local,
    ready,
    serving,
    terminating,
    nodeUnknown: ep.nodeName === "",
  });
  if (local) ep.onItsNode = made;
  else ep.elsewhere = made;
  return made;
}

function computePort(
  service: Service,
  port: ServicePort,
  families: readonly FamilyView[],
  node: NodeView,
): LocalServicePort {
  const zone = node.labels[LABEL_ZONE] ?? "";
  const internal: Record<IPFamily, readonly LocalEndpoint[]> = { IPv4: NO_ENDPOINTS, IPv6: NO_ENDPOINTS };
  const external: Record<IPFamily, readonly LocalEndpoint[]> = { IPv4: NO_ENDPOINTS, IPv6: NO_ENDPOINTS };
  let endpointFamilies: readonly IPFamily[] = NO_FAMILIES;
  for (const view of families) {
    const family = view.addresses.family;
    const endpoints = endpointsOfPort(view.endpoints, port);
    const { internalLocal, externalLocal, portExternal, policy } = portTraffic(service, port, view.addresses);
    const { clusterEndpoints, localEndpoints, hasAnyEndpoints } = categorizeEndpoints(
      endpoints,
      policy,
      node.name,
      zone,
    );
    const toThisNode = (ep: EndpointInfo) => toLocal(ep, node.name);
    internal[family] = (internalLocal ? localEndpoints : clusterEndpoints).map(toThisNode);
    if (portExternal) external[family] = (externalLocal ? localEndpoints : clusterEndpoints).map(toThisNode);
    if (hasAnyEndpoints) endpointFamilies = withFamily(endpointFamilies, family);
  }
  // Each family's list is in address order, and the one order puts IPv4 before IPv6: the flat
  // lists are the two families' lists one after the other, split where the IPv4 ones end.
  return {
    name: port.name,
    protocol: port.protocol,
    port: port.port,
    nodePort: port.nodePort,
    hasEndpoints: endpointFamilies.length > 0,
    endpointFamilies,
    internalEndpoints: joined(internal),
    externalEndpoints: joined(external),
    internalIPv4Count: internal.IPv4.length,
    externalIPv4Count: external.IPv4.length,
  };
}

const NO_ENDPOINTS: readonly LocalEndpoint[] = [];

/** Every port's list of families with endpoints is one of these: 200k ports hold five lists. */
const NO_FAMILIES: readonly IPFamily[] = Object.freeze([]);
const FAMILY_LISTS = {
  IPv4: Object.freeze(["IPv4"]),
  IPv6: Object.freeze(["IPv6"]),
  "IPv4,IPv6": Object.freeze(["IPv4", "IPv6"]),
  "IPv6,IPv4": Object.freeze(["IPv6", "IPv4"]),
} as const satisfies Record<string, readonly IPFamily[]>;

/** `families` (none or one, in the order served) and then `family`. */
function withFamily(families: readonly IPFamily[], family: IPFamily): readonly IPFamily[] {
  const first = families[0];
  if (first === undefined) return FAMILY_LISTS[family];
  return first === "IPv4" ? FAMILY_LISTS["IPv4,IPv6"] : FAMILY_LISTS["IPv6,IPv4"];
}

function joined({ IPv4, IPv6 }: Record<IPFamily, readonly LocalEndpoint[]>): readonly LocalEndpoint[] {
  if (IPv6.length === 0) return IPv4;
  return IPv4.length === 0 ? IPv6 : [...IPv4, ...IPv6];
}

/** Unique IPs of local, ready endpoints over every port: what a healthCheckNodePort reports. */
function countLocalReady(families: readonly FamilyView[], nodeName: string): number {
  let ips: Set<string> | undefined;
  for (const view of families) {
    for (const { endpoints } of view.endpoints) {
      for (const ep of endpoints) {
        if (!ep.ready || !isLocal(ep, nodeName)) continue;
        ips ??= new Set();
        ips.add(ep.ip);
      }
    }
  }
  return ips?.size ?? 0;
}

const TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time";

/** The latest trigger time over the slices, if any slice carries a valid one. */
function endpointsChangedAt(slices: readonly EndpointSlice[]): { endpointsChangedAt?: number } {
  let latest: number | undefined;
  for (const slice of slices) {
    const text = slice.metadata.annotations[TRIGGER_TIME];
    const t = text === undefined ? Number.NaN : Date.parse(text);
    if (!Number.isNaN(t) && (latest === undefined || t > latest)) latest = t;
  }
  return latest === undefined ? {} : { endpointsChangedAt: latest };
}

/**
 * What the service is on every node alike: each served family's addresses and merged endpoints
 * (from the slices in effect: primary or active fallback, see slicesInEffect). undefined when no
 * node programs anything for it: headless (clusterIP "" or "None"), ExternalName, or no cluster
 * IP in any family.
 */
export function serviceFamilyViews(
  service: Service,
  slices: readonly EndpointSlice[],
): readonly FamilyView[] | undefined {
  if (service.type === "ExternalName" || service.clusterIP === "" || service.clusterIP === "None")
    return undefined;
  const served = servedClusterIPs(service);
  if (served.length === 0) return undefined;
  const serving = slicesInEffect(slices);
  return served.map(([family, clusterIP]) => ({
    addresses: {
      family,
      clusterIP,
      externalIPs: externalIPsForFamily(service, family),
      loadBalancerIPs: loadBalancerIPsForFamily(service, family),
      sourceRanges: sourceRangesForFamily(service, family),
    },
    endpoints: mergeEndpoints(serving, family),
  }));
}

/**
 * What this node programs for the service; undefined when it programs nothing (see
 * serviceFamilyViews). `views` are the service's family views when already made for another node.
 */
export function computeLocalService(
  service: Service,
  slices: readonly EndpointSlice[],
  node: NodeView,
  views: readonly FamilyView[] | undefined = serviceFamilyViews(service, slices),
): LocalService | undefined {
  if (views === undefined) return undefined;
  const healthChecked = service.type === "LoadBalancer" && service.externalTrafficPolicy === "Local";
  return {
    namespace: service.metadata.namespace,
    name: service.metadata.name,
    type: service.type,
    families: views.map((view) => view.addresses),
    sessionAffinitySeconds:
      service.sessionAffinity === "ClientIP" ? service.sessionAffinityTimeoutSeconds : 0,
    internalTrafficPolicy: service.internalTrafficPolicy,
    externalTrafficPolicy: service.externalTrafficPolicy,
    healthCheckNodePort: healthChecked ? service.healthCheckNodePort : 0,
    localReadyEndpoints: countLocalReady(views, node.name),
    ...endpointsChangedAt(slices),
    ports: service.ports.map((port) => computePort(service, port, views, node)),
  };
}
