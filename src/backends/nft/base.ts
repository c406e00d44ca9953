// The static skeleton of a family's table: hooks, dispatch maps and helper chains. Every service
// adds only map elements and its own chains to it, so packet dispatch is one map lookup whatever
// the number of services.

import { MASQUERADE_MARK } from "../../backend-core/masquerade.ts";
import type { TableConfig } from "./fragment.ts";
import { endpointsMapName, PROTOCOLS, STATIC } from "./names.ts";
import { addressType, type BaseChainHook, type NftOp, type SetDeclaration } from "./ops.ts";

interface StaticChain {
  readonly name: string;
  /** Absent for regular chains. */
  readonly hook?: BaseChainHook;
  readonly rules: readonly string[];
}

// Numeric priorities: nft 1.0.6 accepts `dstnat` only on nat-capable hooks. dstnat is -100,
// srcnat 100. Filtering runs just before DNAT (-110) so source ranges see the original address.
const FILTER_PRE_DNAT = -110;
const FILTER_POST_DNAT = -90;

function staticChains(cfg: TableConfig): StaticChain[] {
  const ipk = cfg.family;
  const mark = cfg.masqueradeMark ?? MASQUERADE_MARK;
  const loopback = cfg.family === "ip" ? "127.0.0.0/8" : "::1";
  const toNode = `${ipk} daddr != ${loopback} ${ipk} daddr @${STATIC.nodePortIPs} fib daddr type local`;
  const hasNodePorts = cfg.nodePortCIDRs.length > 0;
  const base = (type: BaseChainHook["type"], hook: BaseChainHook["hook"], priority: number) => ({
    type,
    hook,
    priority,
  });
  return [
    {
      name: STATIC.services,
      rules: [
        `${ipk} daddr . meta l4proto . th dport vmap @${STATIC.serviceIPs}`,
        ...(hasNodePorts ? [`${toNode} meta l4proto . th dport vmap @${STATIC.serviceNodePorts}`] : []),
      ],
    },
    {
      name: STATIC.serviceEndpointsCheck,
      rules: [`${ipk} daddr . meta l4proto . th dport vmap @${STATIC.noEndpointServices}`],
    },
    {
      name: STATIC.nodePortEndpointsCheck,
      rules: hasNodePorts ? [`${toNode} meta l4proto . th dport vmap @${STATIC.noEndpointNodePorts}`] : [],
    },
    {
      name: STATIC.firewallCheck,
      rules: [`${ipk} daddr . meta l4proto . th dport vmap @${STATIC.firewallIPs}`],
    },
    // Reached only by packets that no service DNAT took: a known ClusterIP on an unknown port is
    // rejected; any other address in a Service range belongs to no service and is dropped.
    {
      name: STATIC.clusterIPsCheck,
      rules: [`${ipk} daddr @${STATIC.clusterIPs} reject`, `${ipk} daddr @${STATIC.serviceCIDRs} drop`],
    },
    { name: STATIC.markForMasquerade, rules: [`meta mark set meta mark | ${mark}`] },
    {
      name: STATIC.masquerading,
      rules: [
        // Hairpin: an endpoint that reached itself through a service must see the node as source.
        `ct status dnat ${ipk} saddr . ${ipk} daddr @${STATIC.hairpin} jump ${STATIC.markForMasquerade}`,
        `meta mark & ${mark} == 0 return`,
        `meta mark set meta mark ^ ${mark}`,
        "masquerade fully-random",
      ],
    },
    { name: STATIC.rejectChain, rules: ["reject"] },
    {
      name: "filter-prerouting",
      hook: base("filter", "prerouting", FILTER_PRE_DNAT),
      rules: [`ct state new jump ${STATIC.firewallCheck}`],
    },
    {
      name: "filter-input",
      hook: base("filter", "input", FILTER_PRE_DNAT),
      rules: [
        `ct state new jump ${STATIC.nodePortEndpointsCheck}`,
        `ct state new jump ${STATIC.serviceEndpointsCheck}`,
      ],
    },
    {
      name: "filter-forward",
      hook: base("filter", "forward", FILTER_PRE_DNAT),
      rules: [
        `ct state new jump ${STATIC.serviceEndpointsCheck}`,
        `ct state new jump ${STATIC.clusterIPsCheck}`,
      ],
    },
    {
      name: "filter-output",
      hook: base("filter", "output", FILTER_PRE_DNAT),
      rules: [
        `ct state new jump ${STATIC.serviceEndpointsCheck}`,
        `ct state new jump ${STATIC.firewallCheck}`,
      ],
    },
    {
      name: "filter-output-post-dnat",
      hook: base("filter", "output", FILTER_POST_DNAT),
      rules: [`ct state new jump ${STATIC.clusterIPsCheck}`],
    },
    { name: "nat-prerouting", hook: base("nat", "prerouting", -100), rules: [`jump ${STATIC.services}`] },
    { name: "nat-output", hook: base("nat", "output", -100), rules: natOutputRules(cfg) },
    {
      name: "nat-postrouting",
      hook: base("nat", "postrouting", 100),
      rules: [`jump ${STATIC.masquerading}`],
    },
  ];
}

/**
 * What the node's own packets meet before routing. With socket balancing, TCP and UDP to a
 * Service address were connected to an endpoint in the socket already; what reaches this hook
 * with a Service address is what the programs pass on: SCTP, and load-balancer IPs with source
 * ranges (their filter runs in filter-output first). The drops stay in the filter chains.
 */
function natOutputRules(cfg: TableConfig): string[] {
  if (cfg.socketBalanced !== true) return [`jump ${STATIC.services}`];
  return [
    `meta l4proto sctp jump ${STATIC.services}`,
    `${cfg.family} daddr . meta l4proto . th dport @${STATIC.firewallIPs} jump ${STATIC.services}`,
  ];
}

/** Names of the chains the skeleton owns; everything else in the table belongs to services. */
export function staticChainNames(cfg: TableConfig): Set<string> {
  return new Set(staticChains(cfg).map((c) => c.name));
}

/** Names of the static sets and maps, but for the endpoint maps (of one generation: endpointsMaps). */
export const STATIC_SET_NAMES: ReadonlySet<string> = new Set([
  STATIC.clusterIPs,
  STATIC.nodePortIPs,
  STATIC.podCIDRs,
  STATIC.serviceCIDRs,
  STATIC.hairpin,
  STATIC.serviceIPs,
  STATIC.serviceNodePorts,
  STATIC.noEndpointServices,
  STATIC.noEndpointNodePorts,
  STATIC.firewallIPs,
]);

/**
 * Operations that create the skeleton, or converge an existing one in place: `add` is
 * idempotent and each static chain is flushed and refilled within the same transaction, so a
 * running table keeps forwarding while it is adopted.
 */
export function skeletonOps(cfg: TableConfig): NftOp[] {
  const ipk = cfg.family;
  const addr = addressType(cfg.family);
  const set = (name: string, declaration: SetDeclaration): NftOp => ({
    verb: "add",
    kind: "set",
    name,
    declaration,
  });
  const map = (name: string, declaration: SetDeclaration): NftOp => ({
    verb: "add",
    kind: "map",
    name,
    declaration,
  });
  const ranges: SetDeclaration = { key: { types: [addr] }, flags: ["interval"], autoMerge: true };
  const toService: SetDeclaration = {
    key: { types: [addr, "inet_proto", "inet_service"] },
    value: "verdict",
  };
  const toNodePort: SetDeclaration = { key: { types: ["inet_proto", "inet_service"] }, value: "verdict" };
  const out: NftOp[] = [
    { verb: "add", kind: "table" },
    set(STATIC.clusterIPs, { key: { types: [addr] } }),
    set(STATIC.nodePortIPs, ranges),
    set(STATIC.podCIDRs, ranges),
    set(STATIC.serviceCIDRs, ranges),
    set(STATIC.hairpin, { key: { types: [addr, addr] } }),
    map(STATIC.serviceIPs, toService),
    map(STATIC.serviceNodePorts, toNodePort),
    map(STATIC.noEndpointServices, toService),
    map(STATIC.noEndpointNodePorts, toNodePort),
    map(STATIC.firewallIPs, toService),
  ];
  // `typeof` because a numgen value has no named type; the modulus in it does not matter.
  for (const p of PROTOCOLS) {
    const value = `${ipk} daddr . ${p} dport`;
    out.push(
      map(endpointsMapName.byAddress(p, cfg.generation), {
        key: { typeOf: `${ipk} daddr . th dport . numgen random mod 1` },
        value,
      }),
      map(endpointsMapName.byNodePort(p, cfg.generation), {
        key: { typeOf: "th dport . numgen random mod 1" },
        value,
      }),
    );
  }
  const chains = staticChains(cfg);
  for (const c of chains) out.push({ verb: "add", kind: "chain", name: c.name, hook: c.hook });
  for (const c of chains) {
    out.push({ verb: "flush", kind: "chain", name: c.name });
    for (const rule of c.rules) out.push({ verb: "add", kind: "rule", chain: c.name, rule });
  }
  out.push({ verb: "flush", kind: "set", name: STATIC.nodePortIPs });
  if (cfg.nodePortCIDRs.length > 0)
    out.push({ verb: "add", kind: "element", set: STATIC.nodePortIPs, elements: cfg.nodePortCIDRs });
  out.push({ verb: "flush", kind: "set", name: STATIC.podCIDRs });
  if (cfg.podCIDRs.length > 0)
    out.push({ verb: "add", kind: "element", set: STATIC.podCIDRs, elements: cfg.podCIDRs });
  return out;
}
