// Which of kube-proxy's iptables objects to remove, from `iptables-save` output, as input for
// `iptables-restore --noflush`. Pure. Covers the chains of kube-proxy's iptables and ipvs modes
// and nothing of kubelet's (KUBE-FIREWALL in filter, KUBE-KUBELET-CANARY, KUBE-MARK-DROP).
//
// A kube-proxy chain that another program's chain still jumps to is kept (with every kube-proxy
// chain it reaches): removing it would break that program's rule, and the kernel refuses anyway.

import { parseIptablesSave, type SavedTable } from "../iptables-save.ts";

/** kube-proxy's chains per table: exact names. */
const OWNED: Readonly<Record<string, readonly string[]>> = {
  nat: [
    "KUBE-SERVICES",
    "KUBE-NODEPORTS",
    "KUBE-POSTROUTING",
    "KUBE-MARK-MASQ",
    "KUBE-PROXY-CANARY",
    // ipvs mode
    "KUBE-LOAD-BALANCER",
    "KUBE-NODE-PORT",
    "KUBE-FIREWALL",
    "KUBE-LOOP-BACK",
  ],
  filter: [
    "KUBE-SERVICES",
    "KUBE-EXTERNAL-SERVICES",
    "KUBE-NODEPORTS",
    "KUBE-FORWARD",
    "KUBE-PROXY-FIREWALL",
    "KUBE-PROXY-CANARY",
    // ipvs mode
    "KUBE-NODE-PORT",
    "KUBE-SOURCE-RANGES-FIREWALL",
    "KUBE-IPVS-FILTER",
    "KUBE-IPVS-OUT-FILTER",
  ],
  mangle: ["KUBE-PROXY-CANARY"],
};

/** Per-service chains of the iptables mode (nat table). */
const OWNED_PREFIXES: Readonly<Record<string, readonly string[]>> = {
  nat: ["KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-", "KUBE-XLB-"],
};

interface TablePlan {
  readonly table: string;
  /** `-A …` rules of other chains that jump to a removed chain, as saved. */
  readonly deleteRules: readonly string[];
  readonly removeChains: readonly string[];
  /** kube-proxy chains left because another program's rule still uses them. */
  readonly keptChains: readonly string[];
}

export function isKubeProxyChain(table: string, chain: string): boolean {
  return (
    (OWNED[table] ?? []).includes(chain) || (OWNED_PREFIXES[table] ?? []).some((p) => chain.startsWith(p))
  );
}

function planTable(table: string, saved: SavedTable): TablePlan {
  const owned = new Set([...saved.chains.keys()].filter((c) => isKubeProxyChain(table, c)));
  const kept = new Set<string>();
  // Chains another program's user chain jumps to, and everything they reach, stay.
  const keep = (chain: string) => {
    if (!owned.has(chain) || kept.has(chain)) return;
    kept.add(chain);
    for (const r of saved.rules) if (r.chain === chain && r.target !== undefined) keep(r.target);
  };
  for (const r of saved.rules) {
    const foreignUserChain = !owned.has(r.chain) && saved.chains.get(r.chain)?.builtin !== true;
    if (foreignUserChain && r.target !== undefined) keep(r.target);
  }
  const remove = [...owned].filter((c) => !kept.has(c)).sort();
  const removeSet = new Set(remove);
  const deleteRules = saved.rules
    .filter((r) => !owned.has(r.chain) && r.target !== undefined && removeSet.has(r.target))
    .map((r) => r.line);
  return { table, deleteRules, removeChains: remove, keptChains: [...kept].sort() };
}

/** `iptables-restore --noflush` input carrying out the plans; "" when there is nothing to do. */
export function restoreText(plans: readonly TablePlan[]): string {
  const parts: string[] = [];
  for (const p of plans) {
    if (p.deleteRules.length === 0 && p.removeChains.length === 0) continue;
    parts.push(
      `*${p.table}`,
      ...p.deleteRules.map((line) => `-D${line.slice(2)}`),
      // Flush every chain before deleting any: they jump to each other.
      ...p.removeChains.map((c) => `-F ${c}`),
      ...p.removeChains.map((c) => `-X ${c}`),
      "COMMIT",
    );
  }
  return parts.length === 0 ? "" : `${parts.join("\n")}\n`;
}

export function planIptables(saveOutput: string): TablePlan[] {
  return [...parseIptablesSave(saveOutput)].map(([table, saved]) => planTable(table, saved));
}
