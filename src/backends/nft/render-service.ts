// Pure translation of one LocalService into the chains, affinity sets and map elements of one
// family's table. The brain already chose which endpoints serve internal and external traffic;
// this file only encodes those choices.
//
// Most service ports own no chain: the dispatch maps send them to a shared `pick-<N>` chain and
// their endpoints are elements of an endpoints map (`pick.ts`), so an endpoint change touches map
// elements only. Ports with ClientIP affinity need per-endpoint sticky rules, and eTP Local needs
// to tell pods, the node and other clients apart, so those keep chains of their own.
//
// Those chains balance with one rule per endpoint (`numgen random mod (N-i) 0 … dnat`), which picks
// each endpoint with probability 1/N, instead of an inline `numgen … vmap { … }`: every inline
// map is an anonymous kernel set, and the kernel names anonymous sets by scanning all sets of
// the table, which makes a cold start quadratic (measured: 10k services 11.5 s instead of 0.3 s).
// The DNAT happens in the service chain itself, so no per-endpoint chain is needed; hairpin
// traffic is caught by the static `hairpin-endpoints` set in the masquerading chain.

import { canonicalIP, cidrContains } from "../../model/ip.ts";
import {
  endpointString,
  type LocalEndpoint,
  type LocalService,
  type LocalServicePort,
  ofFamily,
} from "../../model/local.ts";
import { ipFamilyOfTable } from "./addresses.ts";
import type {
  AffinitySetSpec,
  ChainSpec,
  ElementGroupSpec,
  ElementSpec,
  Fragment,
  TableConfig,
} from "./fragment.ts";
import { EMPTY_FRAGMENT } from "./fragment.ts";
import { affinitySetName, chainName, type NftProtocol, STATIC, servicePortId } from "./names.ts";
import { endpointsMapOf, type PickKind, pickChain } from "./pick.ts";

interface Collector {
  readonly chains: ChainSpec[];
  readonly shared: Map<string, ChainSpec>;
  readonly sets: Map<string, AffinitySetSpec>;
  /** By set, then by key: the first value for a key wins. */
  readonly elements: Map<string, Map<string, ElementSpec>>;
  /** By set and prefix: the first list for a prefix wins. */
  readonly groups: Map<string, ElementGroupSpec>;
  readonly hairpins: Set<string>;
}

function addElement(c: Collector, set: string, key: string, value = ""): void {
  let bySet = c.elements.get(set);
  if (bySet === undefined) {
    bySet = new Map();
    c.elements.set(set, bySet);
  }
  // Keyed by the key text itself: its hash is computed here once, and the mirror's lookup of
  // the same string reuses it.
  if (!bySet.has(key)) bySet.set(key, { set, key, value });
}

export function renderService(svc: LocalService, cfg: TableConfig): Fragment {
  const clusterIP = ofFamily(svc.clusterIPs, ipFamilyOfTable(cfg.family))[0];
  // As kube-proxy does, a family's table carries a service only when it has a ClusterIP there.
  if (clusterIP === undefined) return EMPTY_FRAGMENT;
  const c: Collector = {
    chains: [],
    shared: new Map(),
    sets: new Map(),
    elements: new Map(),
    groups: new Map(),
    hairpins: new Set(),
  };
  for (const port of svc.ports) renderPort(c, svc, port, canonicalIP(clusterIP), cfg);
  return {
    chains: c.chains,
    sharedChains: [...c.shared.values()],
    affinitySets: [...c.sets.values()],
    elements: [...c.elements.values()].flatMap((bySet) => [...bySet.values()]),
    groups: [...c.groups.values()],
    hairpins: [...c.hairpins],
  };
}

function addressesOfFamily(ips: readonly string[], cfg: TableConfig): string[] {
  return ofFamily(ips, ipFamilyOfTable(cfg.family)).map(canonicalIP);
}

function sameEndpoints(a: readonly LocalEndpoint[], b: readonly LocalEndpoint[]): boolean {
  return a.length === b.length && a.every((ep, i) => ep.ip === b[i]?.ip && ep.port === b[i]?.port);
}

/**
 * Sends `<address> . proto . port` (or `proto . nodePort` without an address) to the shared pick
 * chain for this protocol and endpoint count, and lists the endpoints as `<address> . port . i`
 * (or `nodePort . i`) in the protocol's endpoints map.
 */
function pickFrom(
  c: Collector,
  kind: PickKind,
  proto: NftProtocol,
  address: string | undefined,
  port: number,
  endpoints: readonly LocalEndpoint[],
  cfg: TableConfig,
): void {
  const chain = pickChain(kind, proto, endpoints.length, cfg);
  c.shared.set(chain.name, chain);
  const prefix = address === undefined ? "" : `${address} . `;
  const dispatchMap = address === undefined ? STATIC.serviceNodePorts : STATIC.serviceIPs;
  addElement(c, dispatchMap, `${prefix}${proto} . ${port}`, `goto ${chain.name}`);
  const set = endpointsMapOf(kind, proto);
  const groupPrefix = `${prefix}${port} . `;
  const id = `${set} ${groupPrefix}`;
  const values: string[] = [];
  for (const ep of endpoints) {
    const ip = canonicalIP(ep.ip);
    values.push(`${ip} . ${ep.port}`);
    if (mayHairpin(ep)) c.hairpins.add(ip);
  }
  if (!c.groups.has(id)) c.groups.set(id, { set, prefix: groupPrefix, values });
}

function renderPort(c: Collector, svc: LocalService, port: LocalServicePort, cip: string, cfg: TableConfig) {
  const ipk = cfg.family;
  const proto = port.protocol.toLowerCase() as NftProtocol;
  const spId = servicePortId(svc.namespace, svc.name, proto, port.port);
  const internal = ofFamily(port.internalEndpoints, ipFamilyOfTable(cfg.family));
  const external = ofFamily(port.externalEndpoints, ipFamilyOfTable(cfg.family));
  const hasAny = port.endpointFamilies.includes(cfg.family === "ip" ? "IPv4" : "IPv6");
  const sticky = svc.sessionAffinitySeconds > 0;
  // Reject (ICMP port unreachable) when nothing serves the port in this family; drop when
  // endpoints exist but a Local policy excludes all of them.
  const noEndpoints = hasAny ? "drop" : `goto ${STATIC.rejectChain}`;
  const serviceKey = `${cip} . ${proto} . ${port.port}`;
  addElement(c, STATIC.clusterIPs, cip);

  let internalChain: string | undefined;
  if (internal.length === 0) {
    addElement(c, STATIC.noEndpointServices, serviceKey, noEndpoints);
  } else if (!sticky) {
    pickFrom(c, "cluster", proto, cip, port.port, internal, cfg);
  } else {
    internalChain = chainName.internal(spId);
    const rules: string[] = [];
    const toClusterIP = `${ipk} daddr ${cip} meta l4proto ${proto} th dport ${port.port}`;
    if (cfg.masqueradeAll) rules.push(`${toClusterIP} jump ${STATIC.markForMasquerade}`);
    else if (cfg.podCIDRs.length > 0) {
      rules.push(`${toClusterIP} ${ipk} saddr != @${STATIC.podCIDRs} jump ${STATIC.markForMasquerade}`);
    }
    rules.push(...balance(c, internal, spId, proto, svc.sessionAffinitySeconds, cfg));
    c.chains.push({ name: internalChain, rules, level: 0 });
    addElement(c, STATIC.serviceIPs, serviceKey, `goto ${internalChain}`);
  }

  const nodePort = cfg.nodePortCIDRs.length > 0 ? port.nodePort : 0;
  const externalIPs = addressesOfFamily(svc.externalIPs, cfg);
  const lbIPs = addressesOfFamily(svc.loadBalancerIPs, cfg);
  const vips = [...externalIPs, ...lbIPs];
  if (nodePort === 0 && vips.length === 0) return;

  if (!hasAny) {
    // Nothing to balance over: the no-endpoint maps below reject.
  } else if (!sticky && svc.externalTrafficPolicy === "Cluster") {
    if (external.length > 0) {
      for (const vip of vips) pickFrom(c, "external", proto, vip, port.port, external, cfg);
      if (nodePort > 0) pickFrom(c, "nodePort", proto, undefined, nodePort, external, cfg);
    }
  } else {
    if (internalChain === undefined && internal.length > 0) {
      // The eTP Local short-circuit needs a chain over the internal endpoints; the ClusterIP
      // itself still goes through the shared pick chain.
      internalChain = chainName.internal(spId);
      c.chains.push({ name: internalChain, rules: balance(c, internal, spId, proto, 0, cfg), level: 0 });
    }
    let externalEndpointsChain: string | undefined;
    if (external.length > 0) {
      if (internalChain !== undefined && sameEndpoints(internal, external))
        externalEndpointsChain = internalChain;
      else {
        externalEndpointsChain = chainName.externalEndpoints(spId);
        const rules = balance(c, external, spId, proto, svc.sessionAffinitySeconds, cfg);
        c.chains.push({ name: externalEndpointsChain, rules, level: 0 });
      }
    }
    const externalChain = chainName.external(spId);
    c.chains.push({
      name: externalChain,
      rules: externalRules(svc, internalChain, externalEndpointsChain, cfg),
      level: 1,
    });
    for (const vip of vips)
      addElement(c, STATIC.serviceIPs, `${vip} . ${proto} . ${port.port}`, `goto ${externalChain}`);
    if (nodePort > 0)
      addElement(c, STATIC.serviceNodePorts, `${proto} . ${nodePort}`, `goto ${externalChain}`);
  }
  if (external.length === 0) {
    for (const vip of vips)
      addElement(c, STATIC.noEndpointServices, `${vip} . ${proto} . ${port.port}`, noEndpoints);
    if (nodePort > 0) addElement(c, STATIC.noEndpointNodePorts, `${proto} . ${nodePort}`, noEndpoints);
  }
  if (lbIPs.length > 0 && svc.sourceRanges.length > 0) {
    const fw = chainName.firewall(spId);
    c.chains.push({ name: fw, rules: firewallRules(svc, lbIPs, cfg), level: 0 });
    for (const lb of lbIPs)
      addElement(c, STATIC.firewallIPs, `${lb} . ${proto} . ${port.port}`, `goto ${fw}`);
  }
}

/**
 * The entry chain of NodePort, externalIP and load-balancer traffic.
 * - eTP Cluster: masquerade, then the external endpoints.
 * - eTP Local: pod traffic short-circuits to the internal chain unmasqueraded (as if it went out
 *   to a load balancer and back); traffic from the node itself is masqueraded and sent to the
 *   internal chain; everything else goes to the (local) external endpoints, keeping the client IP.
 *   kube-proxy short-circuits to its "cluster" chain; the local state's internal endpoints are
 *   exactly that when iTP is Cluster, and when both policies are Local they are the endpoints the
 *   brain allows for in-cluster traffic, which is the most faithful choice the state offers.
 */
function externalRules(
  svc: LocalService,
  internalChain: string | undefined,
  externalEndpointsChain: string | undefined,
  cfg: TableConfig,
): string[] {
  const rules: string[] = [];
  if (svc.externalTrafficPolicy === "Local") {
    if (internalChain !== undefined) {
      if (cfg.podCIDRs.length > 0)
        rules.push(`${cfg.family} saddr @${STATIC.podCIDRs} goto ${internalChain}`);
      rules.push(`fib saddr type local jump ${STATIC.markForMasquerade}`);
      rules.push(`fib saddr type local goto ${internalChain}`);
    }
  } else {
    rules.push(`jump ${STATIC.markForMasquerade}`);
  }
  if (externalEndpointsChain !== undefined) rules.push(`goto ${externalEndpointsChain}`);
  return rules;
}

/**
 * loadBalancerSourceRanges: allowed sources return to the caller, everything else is dropped.
 * When a range holds one of the node's IPs, the load-balancer IPs themselves are allowed too, so
 * traffic the node sends to its own VIP passes. A service whose ranges are all of the other
 * family allows no source in this family.
 */
function firewallRules(svc: LocalService, lbIPs: readonly string[], cfg: TableConfig): string[] {
  const ranges = ofFamily(svc.sourceRanges, ipFamilyOfTable(cfg.family));
  const rules = ranges.map((r) => `${cfg.family} saddr ${r} return`);
  if (ranges.some((r) => cfg.nodeIPs.some((ip) => cidrContains(r, ip)))) {
    for (const lb of lbIPs) rules.push(`${cfg.family} saddr ${lb} return`);
  }
  rules.push("drop");
  return rules;
}

/**
 * Only a pod on this node can reach itself through a service here: endpoints on other nodes need
 * no hairpin element (a million fewer at 100k Services × 10 endpoints); one whose node is unknown
 * keeps it, as it may run here.
 */
function mayHairpin(ep: LocalEndpoint): boolean {
  return ep.local || ep.nodeUnknown === true;
}

/** Uniform choice among endpoints, with ClientIP affinity first when the service asks for it. */
function balance(
  c: Collector,
  endpoints: readonly LocalEndpoint[],
  spId: string,
  proto: string,
  affinitySeconds: number,
  cfg: TableConfig,
): string[] {
  const ipk = cfg.family;
  const rules: string[] = [];
  const picks: string[] = [];
  const n = endpoints.length;
  endpoints.forEach((ep, i) => {
    const ip = canonicalIP(ep.ip);
    if (mayHairpin(ep)) c.hairpins.add(ip);
    const dnat = `meta l4proto ${proto} dnat to ${endpointString({ ip, port: ep.port })}`;
    let update = "";
    if (affinitySeconds > 0) {
      const set = affinitySetName(spId, ip, ep.port, affinitySeconds);
      c.sets.set(set, { name: set, timeoutSeconds: affinitySeconds });
      update = `update @${set} { ${ipk} saddr } `;
      rules.push(`${ipk} saddr @${set} ${update}${dnat}`);
    }
    const pick = i < n - 1 ? `numgen random mod ${n - i} 0 ` : "";
    picks.push(`${pick}${update}${dnat}`);
  });
  return [...rules, ...picks];
}
