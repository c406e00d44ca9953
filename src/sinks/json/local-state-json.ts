// The documented JSON form of one node's local state (docs/local-state.md). Pure, so the
// document's shape and ordering are tested without a brain.

import {
  acrossFamilies,
  allServiceCIDRs,
  clusterIPsOf,
  endpointString,
  type LocalService,
  type LocalServicePort,
  type LocalState,
} from "../../model/local.ts";

export interface LocalStateJson {
  readonly node: string;
  readonly revision: number;
  /** The cluster's Service IP ranges: IPv4 first, then by address. */
  readonly serviceCIDRs: readonly string[];
  readonly services: readonly LocalServiceJson[];
}

/**
 * A port as printed: the model's port with each endpoint as an "ip:port" string, the flat lists
 * only (their IPv4 counts are where the lists split by family, which the addresses say).
 */
export type LocalServicePortJson = Omit<
  LocalServicePort,
  "internalEndpoints" | "externalEndpoints" | "internalIPv4Count" | "externalIPv4Count"
> & {
  /** "ip:port" strings, IPv4 before IPv6, each family in address order. */
  readonly internalEndpoints: readonly string[];
  readonly externalEndpoints: readonly string[];
};

/**
 * A service as printed: the model's service without its bookkeeping time, its per-family
 * addresses as one list each (primary family first), ports as above.
 */
export type LocalServiceJson = Omit<LocalService, "endpointsChangedAt" | "families" | "ports"> & {
  readonly clusterIPs: readonly string[];
  readonly externalIPs: readonly string[];
  readonly loadBalancerIPs: readonly string[];
  readonly sourceRanges: readonly string[];
  readonly ports: readonly LocalServicePortJson[];
};

/**
 * The JSON document of a local state. Services are sorted by namespace then name; within a
 * service, ports, IP lists and endpoint lists keep the model's order (spec order, primary family
 * first; endpoints as model/order.ts sorts them), so equal states always print equal documents.
 */
export function localStateToJson(state: LocalState): LocalStateJson {
  const services = sortedServices(state);
  return {
    node: state.node,
    revision: state.revision,
    serviceCIDRs: [...allServiceCIDRs(state.serviceCIDRs)],
    services: services.map(serviceToJson),
  };
}

/** The state's services sorted by namespace, then name. */
export function sortedServices(state: LocalState): LocalService[] {
  const services = [...state.services.values()];
  // One key per service, compared once per step: reading two fields of two services scattered
  // over the heap at every comparison made this sort a second at 100k. NUL sorts before any
  // character of a name, so the keys order as (namespace, name) pairs.
  const keys = services.map((s) => `${s.namespace}\u0000${s.name}`);
  const order = services.map((_, i) => i).sort((a, b) => compareText(keys[a] ?? "", keys[b] ?? ""));
  return order.map((i) => services[i] as LocalService);
}

export function serviceToJson(s: LocalService): LocalServiceJson {
  // Written field by field, not spread, so the key order of the document is fixed here.
  return {
    namespace: s.namespace,
    name: s.name,
    type: s.type,
    clusterIPs: clusterIPsOf(s),
    externalIPs: acrossFamilies(s, "externalIPs"),
    loadBalancerIPs: acrossFamilies(s, "loadBalancerIPs"),
    sourceRanges: acrossFamilies(s, "sourceRanges"),
    sessionAffinitySeconds: s.sessionAffinitySeconds,
    internalTrafficPolicy: s.internalTrafficPolicy,
    externalTrafficPolicy: s.externalTrafficPolicy,
    healthCheckNodePort: s.healthCheckNodePort,
    localReadyEndpoints: s.localReadyEndpoints,
    ports: s.ports.map(portToJson),
  };
}

function portToJson(p: LocalServicePort): LocalServicePortJson {
  return {
    name: p.name,
    protocol: p.protocol,
    port: p.port,
    nodePort: p.nodePort,
    hasEndpoints: p.hasEndpoints,
    endpointFamilies: [...p.endpointFamilies],
    internalEndpoints: p.internalEndpoints.map(endpointString),
    externalEndpoints: p.externalEndpoints.map(endpointString),
  };
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
