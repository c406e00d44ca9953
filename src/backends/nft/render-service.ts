// Pure translation of one Service's port plan (`backend-core/port-plan.ts`) into the chains,
// affinity sets and map elements of one family's table. The plan holds every Service decision;
// this file only writes it in nft's terms.
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

import { mayHairpin, type PlanEndpoint, type PortPlan, planService } from "../../backend-core/port-plan.ts";
import { ipFamilyOfNft } from "../../model/ip.ts";
import { endpointString, type LocalService } from "../../model/local.ts";
import type {
  AffinitySetSpec,
  ChainSpec,
  ElementGroupSpec,
  ElementSpec,
  Fragment,
  TableConfig,
} from "./fragment.ts";
import { EMPTY_FRAGMENT } from "./fragment.ts";
import { affinitySetName, chainName, STATIC } from "./names.ts";
import { endpointsMapOf, type PickKind, pickChain } from "./pick.ts";
import { podTraffic } from "./pod-traffic.ts";

interface FragmentBuilder {
  readonly chains: ChainSpec[];
  readonly shared: Map<string, ChainSpec>;
  readonly sets: Map<string, AffinitySetSpec>;
  /** By set, then by key: the first value for a key wins. */
  readonly elements: Map<string, Map<string, ElementSpec>>;
  /** By set and prefix: the first list for a prefix wins. */
  readonly groups: Map<string, ElementGroupSpec>;
  readonly hairpins: Set<string>;
}

function addElement(c: FragmentBuilder, set: string, key: string, value = ""): void {
  let bySet = c.elements.get(set);
  if (bySet === undefined) {
    bySet = new Map();
    c.elements.set(set, bySet);
  }
  // Keyed by the key text itself: its hash is computed here once, and the mirror's lookup of
  // the same string reuses it.
  if (!bySet.has(key)) bySet.set(key, { set, key, value });
}

export function serviceFragment(svc: LocalService, cfg: TableConfig): Fragment {
  const plan = planService(svc, ipFamilyOfNft(cfg.family), cfg);
  if (plan === undefined) return EMPTY_FRAGMENT;
  const c: FragmentBuilder = {
    chains: [],
    shared: new Map(),
    sets: new Map(),
    elements: new Map(),
    groups: new Map(),
    hairpins: new Set(),
  };
  for (const port of plan.ports) addPortObjects(c, port, cfg);
  return {
    chains: c.chains,
    sharedChains: [...c.shared.values()],
    affinitySets: [...c.sets.values()],
    elements: [...c.elements.values()].flatMap((bySet) => [...bySet.values()]),
    groups: [...c.groups.values()],
    hairpins: [...c.hairpins],
  };
}

/**
 * Whether the node's own traffic to this port goes through the rules: always, unless the
 * node's sockets are balanced by to-ebpf's programs, which pass on only SCTP and load-balancer
 * IPs with source ranges. Rules only that traffic needs (the eTP Local short-circuit of the
 * node's sources, hairpin masquerade of a pod on this node reaching itself) are left out then.
 */
function nodeTrafficInRules(p: PortPlan, cfg: TableConfig): boolean {
  return cfg.socketBalanced !== true || p.protocol === "sctp" || p.allowList !== undefined;
}

/**
 * Sends `<address> . proto . port` (or `proto . nodePort` without an address) to the shared pick
 * chain for this protocol and endpoint count, and lists the endpoints as `<address> . port . i`
 * (or `nodePort . i`) in the protocol's endpoints map.
 */
function pickFrom(
  c: FragmentBuilder,
  kind: PickKind,
  p: PortPlan,
  address: string | undefined,
  port: number,
  endpoints: readonly PlanEndpoint[],
  cfg: TableConfig,
): void {
  const chain = pickChain(kind, p.protocol, endpoints.length, cfg);
  c.shared.set(chain.name, chain);
  const prefix = address === undefined ? "" : `${address} . `;
  const dispatchMap = address === undefined ? STATIC.serviceNodePorts : STATIC.serviceIPs;
  addElement(c, dispatchMap, `${prefix}${p.protocol} . ${port}`, `goto ${chain.name}`);
  const set = endpointsMapOf(kind, p.protocol, cfg);
  const groupPrefix = `${prefix}${port} . `;
  const id = `${set} ${groupPrefix}`;
  const values: string[] = [];
  for (const ep of endpoints) {
    // Kept as applied until the next sync, one per endpoint and port: joined, the value is one
    // flat string, where a template literal keeps a rope of three (a third of the heap's objects
    // at 100k Services).
    values.push([ep.ip, ep.port].join(" . "));
    if (mayHairpin(ep) && nodeTrafficInRules(p, cfg)) c.hairpins.add(ep.ip);
  }
  if (!c.groups.has(id)) c.groups.set(id, { set, prefix: groupPrefix, values });
}

function addPortObjects(c: FragmentBuilder, p: PortPlan, cfg: TableConfig) {
  const ipk = cfg.family;
  const { protocol: proto, clusterIP: cip } = p;
  const sticky = p.affinitySeconds > 0;
  const noEndpoints = p.noEndpoints === "drop" ? "drop" : `goto ${STATIC.rejectChain}`;
  const serviceKey = `${cip} . ${proto} . ${p.port}`;
  addElement(c, STATIC.clusterIPs, cip);

  let internalChain: string | undefined;
  if (p.internal.length === 0) {
    addElement(c, STATIC.noEndpointServices, serviceKey, noEndpoints);
  } else if (!sticky) {
    pickFrom(c, "cluster", p, cip, p.port, p.internal, cfg);
  } else {
    internalChain = chainName.internal(p.id);
    const rules: string[] = [];
    const toClusterIP = `${ipk} daddr ${cip} meta l4proto ${proto} th dport ${p.port}`;
    if (p.clusterMasquerade === "all") rules.push(`${toClusterIP} jump ${STATIC.markForMasquerade}`);
    else if (p.clusterMasquerade === "non-pods") {
      rules.push(`${toClusterIP} ${podTraffic(cfg, true)} jump ${STATIC.markForMasquerade}`);
    }
    rules.push(...balanceStatements(c, p, p.internal, p.affinitySeconds, cfg));
    c.chains.push({ name: internalChain, rules, level: 0 });
    addElement(c, STATIC.serviceIPs, serviceKey, `goto ${internalChain}`);
  }

  if (!p.takesExternal) return;
  const vips = p.externalAddresses;

  if (!p.servesExternal) {
    // Nothing to balance over: the no-endpoint maps below reject or drop.
  } else if (!sticky && p.masqueradeExternal) {
    for (const vip of vips) pickFrom(c, "external", p, vip, p.port, p.external, cfg);
    if (p.nodePort > 0) pickFrom(c, "nodePort", p, undefined, p.nodePort, p.external, cfg);
  } else {
    if (internalChain === undefined && p.shortCircuit) {
      // The eTP Local short-circuit needs a chain over the internal endpoints; the ClusterIP
      // itself still goes through the shared pick chain.
      internalChain = chainName.internal(p.id);
      c.chains.push({ name: internalChain, rules: balanceStatements(c, p, p.internal, 0, cfg), level: 0 });
    }
    let externalEndpointsChain: string | undefined;
    if (p.external.length > 0) {
      if (internalChain !== undefined && p.externalSameAsInternal) externalEndpointsChain = internalChain;
      else {
        externalEndpointsChain = chainName.externalEndpoints(p.id);
        const rules = balanceStatements(c, p, p.external, p.affinitySeconds, cfg);
        c.chains.push({ name: externalEndpointsChain, rules, level: 0 });
      }
    }
    const externalChain = chainName.external(p.id);
    c.chains.push({
      name: externalChain,
      rules: externalChainStatements(p, internalChain, externalEndpointsChain, cfg),
      level: 1,
    });
    for (const vip of vips)
      addElement(c, STATIC.serviceIPs, `${vip} . ${proto} . ${p.port}`, `goto ${externalChain}`);
    if (p.nodePort > 0)
      addElement(c, STATIC.serviceNodePorts, `${proto} . ${p.nodePort}`, `goto ${externalChain}`);
  }
  if (p.external.length === 0) {
    for (const vip of vips)
      addElement(c, STATIC.noEndpointServices, `${vip} . ${proto} . ${p.port}`, noEndpoints);
    if (p.nodePort > 0) addElement(c, STATIC.noEndpointNodePorts, `${proto} . ${p.nodePort}`, noEndpoints);
  }
  if (p.allowList !== undefined) {
    const fw = chainName.firewall(p.id);
    const { sourceRanges, loadBalancerIPs } = p.allowList;
    const rules = [...sourceRanges, ...loadBalancerIPs].map((s) => `${ipk} saddr ${s} return`);
    c.chains.push({ name: fw, rules: [...rules, "drop"], level: 0 });
    for (const lb of p.loadBalancerIPs)
      addElement(c, STATIC.firewallIPs, `${lb} . ${proto} . ${p.port}`, `goto ${fw}`);
  }
}

/**
 * The entry chain of NodePort, externalIP and load-balancer traffic: masquerade (eTP Cluster) or
 * the eTP Local short-circuit of pod and node-local sources to the internal chain, then the
 * external endpoints. kube-proxy short-circuits to its "cluster" chain; the local state's
 * internal endpoints are exactly that when iTP is Cluster, and when both policies are Local
 * they are the endpoints the brain allows for in-cluster traffic, the most faithful choice the
 * state offers.
 */
function externalChainStatements(
  p: PortPlan,
  internalChain: string | undefined,
  externalEndpointsChain: string | undefined,
  cfg: TableConfig,
): string[] {
  const rules: string[] = [];
  if (p.masqueradeExternal) rules.push(`jump ${STATIC.markForMasquerade}`);
  else if (p.shortCircuit && internalChain !== undefined) {
    if (p.shortCircuitPods) rules.push(`${podTraffic(cfg, false)} goto ${internalChain}`);
    if (nodeTrafficInRules(p, cfg)) {
      rules.push(`fib saddr type local jump ${STATIC.markForMasquerade}`);
      rules.push(`fib saddr type local goto ${internalChain}`);
    }
  }
  if (externalEndpointsChain !== undefined) rules.push(`goto ${externalEndpointsChain}`);
  return rules;
}

/** Uniform choice among endpoints, with ClientIP affinity first when the service asks for it. */
function balanceStatements(
  c: FragmentBuilder,
  p: PortPlan,
  endpoints: readonly PlanEndpoint[],
  affinitySeconds: number,
  cfg: TableConfig,
): string[] {
  const ipk = cfg.family;
  const rules: string[] = [];
  const picks: string[] = [];
  const n = endpoints.length;
  endpoints.forEach((ep, i) => {
    if (mayHairpin(ep) && nodeTrafficInRules(p, cfg)) c.hairpins.add(ep.ip);
    const dnat = `meta l4proto ${p.protocol} dnat to ${endpointString(ep)}`;
    let update = "";
    if (affinitySeconds > 0) {
      const set = affinitySetName(p.id, ep.ip, ep.port, affinitySeconds);
      c.sets.set(set, { name: set, timeoutSeconds: affinitySeconds });
      update = `update @${set} { ${ipk} saddr } `;
      rules.push(`${ipk} saddr @${set} ${update}${dnat}`);
    }
    const pick = i < n - 1 ? `numgen random mod ${n - i} 0 ` : "";
    picks.push(`${pick}${update}${dnat}`);
  });
  return [...rules, ...picks];
}
