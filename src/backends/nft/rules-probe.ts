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
// The checks go to one long-lived `nft -c -i` (each line its own dry-run transaction, see
// interactive-runner.ts): starting an nft process from a large kpng twice a second per family
// was most of an idle proxy's CPU. A family's two checks go as two lines with one marker after
// them: one round trip. If that process fails, each check goes to `nft -c -f -`.

import type { RulesProbe } from "../../backend-core/rules-probe.ts";
import type { TableConfig } from "./fragment.ts";
import { InteractiveNftRunner } from "./interactive-runner.ts";
import { STATIC } from "./names.ts";
import { ExecNftRunner } from "./runner.ts";

const PROBE_TIMEOUT_MS = 2000;

/** The dry-run deletions that must all be refused as busy for the table to be intact. */
export function probeCommands(cfg: Pick<TableConfig, "family" | "table">): string[] {
  const t = `${cfg.family} ${cfg.table}`;
  return [`delete chain ${t} ${STATIC.services}`, `delete map ${t} ${STATIC.serviceIPs}`];
}

export class NftRulesProbe implements RulesProbe {
  /** Each family's checks, built once: the probe runs every second. */
  readonly #commands: ReadonlyMap<string, readonly string[]>;
  readonly #checks: InteractiveNftRunner;

  /** `command` is the `nft` command, possibly prefixed; `onRestart` hears why `nft -c -i` was restarted. */
  constructor(
    tables: readonly Pick<TableConfig, "family" | "table">[],
    command: readonly string[] = ["nft"],
    onRestart?: (reason: string) => void,
  ) {
    this.#commands = new Map(tables.map((t) => [t.family, probeCommands(t)]));
    const dryRun = [...command, "-c"];
    this.#checks = new InteractiveNftRunner({
      command: dryRun,
      fallback: new ExecNftRunner(dryRun, { timeoutMs: PROBE_TIMEOUT_MS }),
      timeoutMs: PROBE_TIMEOUT_MS,
      ...(onRestart === undefined ? {} : { onRestart }),
    });
  }

  async intact(family: string): Promise<boolean> {
    const commands = this.#commands.get(family);
    if (!commands) return true;
    // One command per transaction: in one batch, deleting `services` would free `service-ips`
    // for the next command, and nft stops at the first command it refuses.
    const output = (await this.#checks.runEach(commands)).split("\n");
    for (const command of commands) {
      const at = output.findIndex((line, i) => line === command && output[i - 1]?.includes("Error:"));
      // No error: allowed, nothing refers to the object any more.
      if (at < 0) return false;
      const error = output[at - 1] ?? "";
      if (/Device or resource busy/.test(error)) continue;
      // The table or object is gone.
      if (/No such file or directory/.test(error)) return false;
      throw new Error(`nft -c ${command} failed: ${error.trim()}`);
    }
    return true;
  }

  /**
   * Starts `nft -c -i` now: call it while kpng is small, since a start forks kpng
   * (src/host/small-spawner.ts). A failure only means the first check starts it again.
   */
  prepare(): Promise<void> {
    return this.#checks.prepare();
  }

  /** Stops the `nft -c -i` process. */
  close(): void {
    this.#checks.close?.();
  }
}
