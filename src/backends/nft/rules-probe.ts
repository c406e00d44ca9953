// The nft backend's answer to "are my rules still there?": the services chain of each table
// exists and holds its dispatch rule. `nft flush ruleset`, deleting or flushing the table, or
// flushing the chain all fail it. Listing one chain is cheap whatever the number of services.

import { execCommand } from "../../node/exec.ts";
import type { RulesProbe } from "../../node/rules-watchdog.ts";
import type { TableConfig } from "./fragment.ts";
import { STATIC } from "./names.ts";

const PROBE_TIMEOUT_MS = 2000;

async function listChain(
  command: readonly string[],
  family: string,
  table: string,
  chain: string,
): Promise<string | undefined> {
  const r = await execCommand([...command, "list", "chain", family, table, chain], {
    timeoutMs: PROBE_TIMEOUT_MS,
  });
  if (r.signal !== null)
    throw new Error(`nft list chain killed by ${r.signal}${r.timedOut ? " (timeout)" : ""}`);
  if (r.code === 0) return r.stdout;
  if (/No such file or directory/.test(r.stderr)) return undefined;
  throw new Error(`nft list chain failed: ${r.stderr.trim()}`);
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
      const text = await listChain(this.#command, t.family, t.table, STATIC.services);
      if (text === undefined || !text.includes("vmap")) return false;
    }
    return true;
  }
}
