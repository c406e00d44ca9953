// Reads what `iptables-save -t <table>` prints: which KPNG- chains exist, and the rules in the
// built-in chains that jump to them. Pure, so adoption and cleanup are tested without a kernel.

import { BUILTIN_CHAINS, isKpngChain } from "./names.ts";

export interface SavedTable {
  /** KPNG- chains that exist in the table. */
  readonly chains: ReadonlySet<string>;
  /** Built-in chain → its rules that jump to a KPNG- chain, as saved (`-A INPUT … -j KPNG-X`), in order. */
  readonly jumps: ReadonlyMap<string, readonly string[]>;
}

export function parseSave(text: string): SavedTable {
  const chains = new Set<string>();
  const jumps = new Map<string, string[]>();
  for (const line of text.split("\n")) {
    if (line.startsWith(":")) {
      const name = line.slice(1).split(" ")[0] ?? "";
      if (isKpngChain(name)) chains.add(name);
    } else if (line.startsWith("-A ")) {
      const chain = line.split(" ")[1] ?? "";
      const target = /\s-[jg] (\S+)/.exec(line)?.[1];
      if (BUILTIN_CHAINS.has(chain) && target !== undefined && isKpngChain(target)) {
        const list = jumps.get(chain) ?? [];
        list.push(line);
        jumps.set(chain, list);
      }
    }
  }
  return { chains, jumps };
}

/** The KPNG- target of a saved jump rule. */
export function jumpTarget(rule: string): string | undefined {
  return /(?:^|\s)-[jg] (\S+)/.exec(rule)?.[1];
}
