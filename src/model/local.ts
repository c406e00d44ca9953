// The node-local state: what a backend receives. The brain has applied every piece of Service
// business logic, so a backend only translates it into rules.

import type { IPFamily, Protocol, ServiceType, TrafficPolicy } from "./kube.ts";
import type { ServiceChangeLog } from "./local-changes.ts";

export interface LocalEndpoint {
  readonly ip: string;
  /** The target port on the endpoint, resolved by the EndpointSlice. */
  readonly port: number;
  /** True when the endpoint runs on this node. */
  readonly local: boolean;
  /**
   * Set when the EndpointSlice names no node for the endpoint: it is not `local`, yet it may run
   * here (a pod reaching itself through its service needs hairpin masquerading). Absent otherwise.
   */
  readonly nodeUnknown?: true;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
}

export interface LocalServicePort {
  readonly name: string;
  readonly protocol: Protocol;
  readonly port: number;
  /** 0 when the port has no node port. */
  readonly nodePort: number;
  /** Whether the port has usable endpoints anywhere in the cluster (any family): reject vs drop. */
  readonly hasEndpoints: boolean;
  /** The families in which the port has usable endpoints anywhere in the cluster. */
  readonly endpointFamilies: readonly IPFamily[];
  /** Where this node sends ClusterIP traffic; sorted by ip then port. */
  readonly internalEndpoints: readonly LocalEndpoint[];
  /** Where this node sends NodePort, LoadBalancer and externalIP traffic; sorted by ip then port. */
  readonly externalEndpoints: readonly LocalEndpoint[];
  /**
   * How many of internalEndpoints are IPv4: the one order puts them first and the IPv6 ones after,
   * so this is where the list splits by family (see familyEndpoints).
   */
  readonly internalIPv4Count: number;
  /** How many of externalEndpoints are IPv4 (the first ones). */
  readonly externalIPv4Count: number;
}

/** A port's endpoints in one IP family: what that family's rules program. */
export interface FamilyEndpoints {
  readonly internal: readonly LocalEndpoint[];
  readonly external: readonly LocalEndpoint[];
}

const NO_ENDPOINTS: readonly LocalEndpoint[] = Object.freeze([]);

/** The part of a list, IPv4 first, that holds one family: the list itself when it holds only that family. */
function familyPart<T>(list: readonly T[], ipv4Count: number, family: IPFamily): readonly T[] {
  if (family === "IPv4") {
    if (ipv4Count === list.length) return list;
    return ipv4Count === 0 ? (NO_ENDPOINTS as readonly T[]) : list.slice(0, ipv4Count);
  }
  if (ipv4Count === 0) return list;
  return ipv4Count === list.length ? (NO_ENDPOINTS as readonly T[]) : list.slice(ipv4Count);
}

/**
 * The port's endpoints in one family, split where the brain counted: no copy for a port whose
 * endpoints are all of one family (nearly every port).
 */
export function familyEndpoints(port: LocalServicePort, family: IPFamily): FamilyEndpoints {
  return {
    internal: familyPart(port.internalEndpoints, port.internalIPv4Count, family),
    external: familyPart(port.externalEndpoints, port.externalIPv4Count, family),
  };
}

/**
 * The port with its lists put in family order (IPv4 first, each family's order kept) and their
 * IPv4 counts set: for a producer that builds the flat lists itself (the wire decoder, tests).
 */
export function withFamilyEndpoints(
  port: Omit<LocalServicePort, "internalIPv4Count" | "externalIPv4Count">,
): LocalServicePort {
  const ordered = (list: readonly LocalEndpoint[]) => {
    const v4 = ofFamily(list, "IPv4");
    const v6 = ofFamily(list, "IPv6");
    const inOrder = list.every((ep, i) => ep === (i < v4.length ? v4[i] : v6[i - v4.length]));
    return { list: inOrder ? list : [...v4, ...v6], ipv4Count: v4.length };
  };
  const internal = ordered(port.internalEndpoints);
  const external = ordered(port.externalEndpoints);
  return {
    ...port,
    internalEndpoints: internal.list,
    externalEndpoints: external.list,
    internalIPv4Count: internal.ipv4Count,
    externalIPv4Count: external.ipv4Count,
  };
}

/**
 * A Service's addresses in one IP family, canonical: what that family's rules program (kube-proxy
 * runs one proxier per family, and each sees only these).
 */
export interface LocalServiceFamily {
  readonly family: IPFamily;
  readonly clusterIP: string;
  readonly externalIPs: readonly string[];
  /** Load-balancer ingress IPs with ipMode VIP or unset. */
  readonly loadBalancerIPs: readonly string[];
  /** loadBalancerSourceRanges of this family, trimmed and normalised. */
  readonly sourceRanges: readonly string[];
}

export interface LocalService {
  readonly namespace: string;
  readonly name: string;
  readonly type: ServiceType;
  /** One per family the service has a cluster IP in, primary family first. */
  readonly families: readonly LocalServiceFamily[];
  /** ClientIP affinity timeout; 0 means no affinity. */
  readonly sessionAffinitySeconds: number;
  readonly internalTrafficPolicy: TrafficPolicy;
  readonly externalTrafficPolicy: TrafficPolicy;
  /** Set only for LoadBalancer services with externalTrafficPolicy Local; else 0. */
  readonly healthCheckNodePort: number;
  /** Unique local ready endpoint IPs, as a healthCheckNodePort server reports them. */
  readonly localReadyEndpoints: number;
  /**
   * Latest `endpoints.kubernetes.io/last-change-trigger-time` of the service's EndpointSlices (ms
   * since epoch), for the network-programming latency metric; absent when no slice has it.
   */
  readonly endpointsChangedAt?: number;
  readonly ports: readonly LocalServicePort[];
}

export interface LocalState {
  readonly node: string;
  /** Increases by one each time this node's local state changes, and only then. */
  readonly revision: number;
  /**
   * Keyed by "namespace/name". A service whose computed value did not change keeps the same
   * object from one state to the next, so a consumer can diff by identity.
   */
  readonly services: ReadonlyMap<string, LocalService>;
  /**
   * Whether this node may take load-balancer traffic (/healthz): its Node object is known, not
   * being deleted, not tainted for deletion. Absent when the producer does not know (treated as
   * eligible).
   */
  readonly nodeEligible?: boolean;
  /**
   * This node's primary IPs from its Node object (InternalIP, else ExternalIP; at most one per
   * family, the primary family first): NodePort addresses in nftables mode by default. Empty when
   * the Node object holds none; absent when the producer does not know (the watch API does not
   * carry them).
   */
  readonly nodeIPs?: readonly string[];
  /**
   * This node's spec.podCIDRs from its Node object: the pod CIDRs with --detect-local-mode
   * NodeCIDR. Empty when the Node object holds none; absent when the producer does not know.
   */
  readonly nodePodCIDRs?: readonly string[];
  /**
   * The cluster's Service IP ranges per family, each by address; none inside another. A packet to
   * an address in them that no service holds is dropped. Empty when unknown.
   */
  readonly serviceCIDRs: ServiceCIDRsByFamily;
  /**
   * The producer's record of which services each revision changed, shared by all its states:
   * `changedServiceKeys` uses it to diff two states in O(changed). Absent: diff by comparing.
   */
  readonly changeLog?: ServiceChangeLog;
}

/** Service IP ranges split by family: what one family's rules drop. */
export interface ServiceCIDRsByFamily {
  readonly IPv4: readonly string[];
  readonly IPv6: readonly string[];
}

export const NO_SERVICE_CIDRS: ServiceCIDRsByFamily = Object.freeze({ IPv4: [], IPv6: [] });

/** The ranges split by family, each in the list's order: for producers of a local state. */
export function splitServiceCIDRs(cidrs: readonly string[]): ServiceCIDRsByFamily {
  return cidrs.length === 0
    ? NO_SERVICE_CIDRS
    : { IPv4: ofFamily(cidrs, "IPv4"), IPv6: ofFamily(cidrs, "IPv6") };
}

/** Every range, IPv4 first: the one list the wire and the dump carry. */
export function allServiceCIDRs(cidrs: ServiceCIDRsByFamily): readonly string[] {
  if (cidrs.IPv6.length === 0) return cidrs.IPv4;
  return cidrs.IPv4.length === 0 ? cidrs.IPv6 : [...cidrs.IPv4, ...cidrs.IPv6];
}

/** "ip:port", with IPv6 addresses in brackets. */
export function endpointString(ep: { readonly ip: string; readonly port: number }): string {
  // Model addresses are validated: only an IPv6 one holds a colon (a regular expression per
  // endpoint was most of a large dump's cost).
  return ep.ip.includes(":") ? `[${ep.ip}]:${ep.port}` : `${ep.ip}:${ep.port}`;
}

/** The service's addresses in one family; undefined when it has no cluster IP there. */
export function serviceFamily(svc: LocalService, family: IPFamily): LocalServiceFamily | undefined {
  return svc.families.find((f) => f.family === family);
}

/**
 * Whether the service has loadBalancerSourceRanges in any family. Each family is checked by its own
 * list only: a family without ranges allows every source (kube-proxy's per-family proxiers).
 */
export function hasSourceRanges(svc: LocalService): boolean {
  return svc.families.some((f) => f.sourceRanges.length > 0);
}

/** The addresses or ranges of a list over every family of the service, primary family first. */
export function acrossFamilies(
  svc: LocalService,
  list: "externalIPs" | "loadBalancerIPs" | "sourceRanges",
): string[] {
  return svc.families.flatMap((f) => f[list]);
}

/** The service's cluster IPs, primary family first. */
export function clusterIPsOf(svc: LocalService): string[] {
  return svc.families.map((f) => f.clusterIP);
}

/**
 * The addresses or CIDRs of a list that belong to one family, in the list's order: for host-side
 * lists (node addresses, Service IP ranges). Service addresses come split by family already.
 */
export function ofFamily<T extends string | { readonly ip: string }>(
  items: readonly T[],
  family: IPFamily,
): readonly T[] {
  // The model's addresses and CIDRs are validated: only an IPv6 one holds a colon. A list all of
  // one family (nearly every list) is handed back as it is: a renderer at 100k Services asks
  // millions of times.
  const v6 = family === "IPv6";
  const inFamily = (item: T) => (typeof item === "string" ? item : item.ip).includes(":") === v6;
  let i = 0;
  while (i < items.length && inFamily(items[i]!)) i++;
  return i === items.length ? items : items.filter(inFamily);
}

/** The Services of one local state, looked up by "namespace/name". */
export type ServiceLookup = Pick<ReadonlyMap<string, LocalService>, "get">;

/** What a sink (a backend, a dump, the API server) receives: local states over time. */
export interface LocalStateFeed {
  /**
   * Calls the listener with each new state, never concurrently: while the listener's promise is
   * pending, newer states are coalesced and only the latest is delivered next. The first call
   * carries the complete initial state. Returns a function that unsubscribes.
   */
  subscribe(listener: (state: LocalState) => void | Promise<void>): () => void;
  /**
   * Told by a backend that its rules of `families` now hold `state` (a successful sync of each).
   * Lets the producer confirm what it handed over (a Service moving between backends).
   */
  programmed?(state: LocalState, families: readonly IPFamily[]): void;
}
