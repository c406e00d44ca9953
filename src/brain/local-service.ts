// One Service and its EndpointSlices → what this node programs for it. Each family is computed
// on its own, as kube-proxy runs one proxier per family: the addresses and the endpoints stay per
// family, and a port's flat endpoint lists join its families' lists.

import type { EndpointSlice } from "../model/kube.ts";
import { type IPFamily, LABEL_ZONE, type Labels, type Service, type ServicePort } from "../model/kube.ts";
import type { LocalEndpoint, LocalService, LocalServiceFamily, LocalServicePort } from "../model/local.ts";
import { categorizeEndpoints, isLocal, type PortPolicy } from "./categorize.ts";
import { type EndpointInfo, mergeEndpoints, portKey } from "./endpoint-merge.ts";
import { slicesInEffect } from "./fallback.ts";
import {
  clusterIPForFamily,
  externalIPsForFamily,
  loadBalancerIPsForFamily,
  servedFamilies,
  sourceRangesForFamily,
} from "./service-ips.ts";

export interface NodeView {
  readonly name: string;
  readonly labels: Labels;
}

/** What one family contributes to a service: its addresses and its merged endpoints. */
interface FamilyView {
  readonly addresses: LocalServiceFamily;
  readonly endpoints: ReadonlyMap<string, EndpointInfo[]>;
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

/** One object per endpoint and computation: a port's internal and external lists share it. */
function toLocal(ep: EndpointInfo, nodeName: string): LocalEndpoint {
  if (ep.local === undefined) {
    const local = isLocal(ep, nodeName);
    const { ip, port, ready, serving, terminating } = ep;
    ep.local =
      ep.nodeName === ""
        ? { ip, port, local, ready, serving, terminating, nodeUnknown: true }
        : { ip, port, local, ready, serving, terminating };
  }
  return ep.local;
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
  const endpointFamilies: IPFamily[] = [];
  for (const view of families) {
    const family = view.addresses.family;
    const endpoints = view.endpoints.get(portKey(port.name, port.protocol)) ?? [];
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
    if (hasAnyEndpoints) endpointFamilies.push(family);
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

function joined({ IPv4, IPv6 }: Record<IPFamily, readonly LocalEndpoint[]>): readonly LocalEndpoint[] {
  if (IPv6.length === 0) return IPv4;
  return IPv4.length === 0 ? IPv6 : [...IPv4, ...IPv6];
}

/** Unique IPs of local, ready endpoints over every port: what a healthCheckNodePort reports. */
function countLocalReady(families: readonly FamilyView[], nodeName: string): number {
  let ips: Set<string> | undefined;
  for (const view of families) {
    for (const endpoints of view.endpoints.values()) {
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
 * undefined when this node programs nothing for the service: headless (clusterIP "" or "None"),
 * ExternalName, or no cluster IP in any family. The slices are first narrowed to those in effect
 * (primary or active fallback, see slicesInEffect).
 */
export function computeLocalService(
  service: Service,
  slices: readonly EndpointSlice[],
  node: NodeView,
): LocalService | undefined {
  if (service.type === "ExternalName" || service.clusterIP === "" || service.clusterIP === "None")
    return undefined;
  const served = servedFamilies(service);
  if (served.length === 0) return undefined;
  const serving = slicesInEffect(slices);
  const families: FamilyView[] = served.map((family) => ({
    addresses: {
      family,
      clusterIP: clusterIPForFamily(service, family),
      externalIPs: externalIPsForFamily(service, family),
      loadBalancerIPs: loadBalancerIPsForFamily(service, family),
      sourceRanges: sourceRangesForFamily(service, family),
    },
    endpoints: mergeEndpoints(serving, family),
  }));
  const healthChecked = service.type === "LoadBalancer" && service.externalTrafficPolicy === "Local";
  return {
    namespace: service.metadata.namespace,
    name: service.metadata.name,
    type: service.type,
    families: families.map((view) => view.addresses),
    sessionAffinitySeconds:
      service.sessionAffinity === "ClientIP" ? service.sessionAffinityTimeoutSeconds : 0,
    internalTrafficPolicy: service.internalTrafficPolicy,
    externalTrafficPolicy: service.externalTrafficPolicy,
    healthCheckNodePort: healthChecked ? service.healthCheckNodePort : 0,
    localReadyEndpoints: countLocalReady(families, node.name),
    ...endpointsChangedAt(slices),
    ports: service.ports.map((port) => computePort(service, port, families, node)),
  };
}
