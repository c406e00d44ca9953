// The shared `pick-<proto>-<N>` chains. A service port without ClientIP affinity has no chain of
// its own: the dispatch map sends it to the chain for its protocol and endpoint count, which draws
// `numgen random mod N` and looks up `<what the packet was sent to> . i` in an endpoints map to
// DNAT. An endpoint change is then a change of map elements only, which the kernel commits without
// re-validating chains; rewriting a chain with `dnat`/`goto` rules in a table of 10k chains costs
// 20–30 ms per commit.

import type { ChainSpec, TableConfig } from "./fragment.ts";
import { endpointsMapName, type NftProtocol, pickChainName, STATIC } from "./names.ts";
import { podTraffic } from "./pod-traffic.ts";

export type PickKind = keyof typeof pickChainName;

/** The map a pick chain draws from, and the key prefix its elements carry before the index. */
export function endpointsMapOf(kind: PickKind, proto: NftProtocol, cfg: TableConfig): string {
  const g = cfg.generation;
  return kind === "nodePort" ? endpointsMapName.byNodePort(proto, g) : endpointsMapName.byAddress(proto, g);
}

// The explicit `meta l4proto` gives the DNAT its transport protocol; nft refuses a port mapping
// without one.
function dnatRule(kind: PickKind, proto: NftProtocol, n: number, cfg: TableConfig): string {
  const ipk = cfg.family;
  const key = kind === "nodePort" ? "th dport" : `${ipk} daddr . th dport`;
  const map = endpointsMapOf(kind, proto, cfg);
  return `meta l4proto ${proto} dnat ${ipk} to ${key} . numgen random mod ${n} map @${map}`;
}

/**
 * ClusterIP traffic is masqueraded when it does not come from a pod (or always, with
 * --masquerade-all); traffic to node ports and VIPs under eTP Cluster always is.
 */
function masqueradeRules(kind: PickKind, cfg: TableConfig): string[] {
  const mark = `jump ${STATIC.markForMasquerade}`;
  if (kind !== "cluster" || cfg.masqueradeAll) return [mark];
  const notFromPods = podTraffic(cfg, true);
  return notFromPods !== undefined ? [`${notFromPods} ${mark}`] : [];
}

/** Per table config, the pick chains made so far: every service port of a kind shares one object. */
const made = new WeakMap<TableConfig, Map<string, ChainSpec>>();

export function pickChain(kind: PickKind, proto: NftProtocol, n: number, cfg: TableConfig): ChainSpec {
  let chains = made.get(cfg);
  if (chains === undefined) {
    chains = new Map();
    made.set(cfg, chains);
  }
  const name = pickChainName[kind](proto, n, cfg.generation);
  let chain = chains.get(name);
  if (chain === undefined) {
    chain = { name, rules: [...masqueradeRules(kind, cfg), dnatRule(kind, proto, n, cfg)], level: 0 };
    chains.set(name, chain);
  }
  return chain;
}
