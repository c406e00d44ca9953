// The nft backend's answer to "are my rules still there?", by contents rather than names: a
// chain emptied by `nft flush chain` or `nft flush table` is still declared. Every check is a
// dry run (`nft -c`, nothing changes) of deleting an object that only kpng's own rules use:
// the kernel refuses with EBUSY while a rule refers to it, and would allow it once the rules
// that do are gone.
// - `services` is jumped to by the nat base chains: emptied base chains (a flushed table, a
//   flushed `nat-prerouting`) free it;
// - `service-ips` is looked up by the rule of `services`: a flushed `services` chain frees it.
// Each is one netlink request whatever the number of Services, where listing any chain's rules
// first fetches every set element of the table (see docs/node-services.md).

import type { RulesProbe } from "../../backend-core/rules-probe.ts";
import { execCommand } from "../../host/exec.ts";
import type { TableConfig } from "./fragment.ts";
import { STATIC } from "./names.ts";

const PROBE_TIMEOUT_MS = 2000;

/** The dry-run deletions that must all be refused as busy for the table to be intact. */
export function probeCommands(cfg: Pick<TableConfig, "family" | "table">): string[] {
  const t = `${cfg.family} ${cfg.table}`;
  return [`delete chain ${t} ${STATIC.services}`, `delete map ${t} ${STATIC.serviceIPs}`];
}

export class NftRulesProbe implements RulesProbe {
  readonly #tables: readonly TableConfig[];
  readonly #command: readonly string[];

  constructor(tables: readonly TableConfig[], command: readonly string[] = ["nft"]) {
    this.#tables = tables;
    this.#command = command;
  }

  async intact(family: string): Promise<boolean> {
    const cfg = this.#tables.find((t) => t.family === family);
    if (!cfg) return true;
    // One command per run: nft stops at the first refused command of a batch.
    for (const command of probeCommands(cfg)) {
      const r = await execCommand([...this.#command, "-c", "-f", "-"], {
        stdin: `${command}\n`,
        timeoutMs: PROBE_TIMEOUT_MS,
      });
      if (r.signal !== null) throw new Error(`nft -c killed by ${r.signal}${r.timedOut ? " (timeout)" : ""}`);
      // Allowed: nothing refers to the object any more. Missing: the table or object is gone.
      if (r.code === 0 || /No such file or directory/.test(r.stderr)) return false;
      if (!/Device or resource busy/.test(r.stderr))
        throw new Error(`nft -c ${command} failed: ${r.stderr.trim().split("\n")[0] ?? ""}`);
    }
    return true;
  }
}
