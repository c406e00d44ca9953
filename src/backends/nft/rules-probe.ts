// The nft backend's answer to "are my rules still there?": the services chain of each table
// exists and holds its dispatch rule. `nft flush ruleset`, deleting or flushing the table, or
// flushing the chain all fail it. Listing one chain is cheap whatever the number of services.

import { spawn } from "node:child_process";
import type { RulesProbe } from "../../node/rules-watchdog.ts";
import type { TableConfig } from "./fragment.ts";
import { STATIC } from "./names.ts";

const PROBE_TIMEOUT_MS = 2000;

function listChain(
  command: readonly string[],
  family: string,
  table: string,
  chain: string,
): Promise<string | undefined> {
  const [cmd = "nft", ...prefix] = command;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, [...prefix, "list", "chain", family, table, chain], {
      stdio: ["ignore", "pipe", "pipe"],
      timeout: PROBE_TIMEOUT_MS,
      killSignal: "SIGKILL",
    });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      out += c;
    });
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      err += c;
    });
    child.on("error", reject);
    child.on("close", (code, signal) => {
      if (signal !== null) reject(new Error(`nft list chain killed by ${signal} (timeout)`));
      else if (code === 0) resolve(out);
      else if (/No such file or directory/.test(err)) resolve(undefined);
      else reject(new Error(`nft list chain failed: ${err.trim()}`));
    });
  });
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
