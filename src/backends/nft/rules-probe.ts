// The nft backend's answer to "are my rules still there?": each table exists and holds its
// `services` chain and its `nat-prerouting` base chain. `nft flush ruleset` and deleting the
// table or a chain fail it. It asks for the chain declarations only (`nft list chains`): listing
// any chain's rules makes nft fetch every element of every set in the table first, which takes
// minutes at 100k Services (a million endpoint elements) and would run every second. A flush of
// kpng's rules that keeps the chains (`nft flush table`) is therefore not noticed here; it is
// repaired by restarting kpng, which rewrites the table.

import { execCommand } from "../../host/exec.ts";
import type { NftFamily } from "../../model/ip.ts";
import type { RulesProbe } from "../../node/rules-watchdog.ts";
import type { TableConfig } from "./fragment.ts";
import { STATIC } from "./names.ts";

const PROBE_TIMEOUT_MS = 2000;

/** The chains `nft list chains` shows in table `table`: `chain <name> {` lines inside its block. */
export function chainsOfTable(listing: string, family: NftFamily, table: string): Set<string> {
  const out = new Set<string>();
  let inside = false;
  for (const line of listing.split("\n")) {
    const t = line.trim();
    if (t.startsWith("table ")) inside = t === `table ${family} ${table} {`;
    else if (inside && t.startsWith("chain ") && t.endsWith("{")) out.add(t.slice(6, -1).trim());
  }
  return out;
}

export class NftRulesProbe implements RulesProbe {
  readonly #tables: readonly TableConfig[];
  readonly #command: readonly string[];

  constructor(tables: readonly TableConfig[], command: readonly string[] = ["nft"]) {
    this.#tables = tables;
    this.#command = command;
  }

  async intact(): Promise<boolean> {
    for (const t of this.#tables) {
      const r = await execCommand([...this.#command, "list", "chains", t.family], {
        timeoutMs: PROBE_TIMEOUT_MS,
      });
      if (r.signal !== null)
        throw new Error(`nft list chains killed by ${r.signal}${r.timedOut ? " (timeout)" : ""}`);
      if (r.code !== 0) throw new Error(`nft list chains failed: ${r.stderr.trim()}`);
      const chains = chainsOfTable(r.stdout, t.family, t.table);
      if (!chains.has(STATIC.services) || !chains.has("nat-prerouting")) return false;
    }
    return true;
  }
}
