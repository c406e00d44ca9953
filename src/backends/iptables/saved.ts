// What kpng owns in one table as `iptables-save -t <table>` prints it: which KPNG- chains exist,
// and the rules in the built-in chains that jump to them. Pure, so adoption and cleanup are
// tested without a kernel.

import { parseIptablesSave } from "../../host/iptables-save.ts";
import { BUILTIN_CHAINS, isKpngChain } from "./names.ts";

export interface KpngObjects {
  /** KPNG- chains that exist in the table. */
  readonly chains: ReadonlySet<string>;
  /** Built-in chain → its rules that jump to a KPNG- chain, as saved (`-A INPUT … -j KPNG-X`), in order. */
  readonly jumps: ReadonlyMap<string, readonly string[]>;
}

export function parseSave(text: string): KpngObjects {
  const chains = new Set<string>();
  const jumps = new Map<string, string[]>();
  for (const table of parseIptablesSave(text).values()) {
    for (const name of table.chains.keys()) if (isKpngChain(name)) chains.add(name);
    for (const rule of table.rules) {
      if (!BUILTIN_CHAINS.has(rule.chain) || rule.target === undefined || !isKpngChain(rule.target)) continue;
      const list = jumps.get(rule.chain) ?? [];
      list.push(rule.line);
      jumps.set(rule.chain, list);
    }
  }
  return { chains, jumps };
}

/** The KPNG- target of a saved jump rule. */
export function jumpTarget(rule: string): string | undefined {
  return /(?:^|\s)-[jg] (\S+)/.exec(rule)?.[1];
}
