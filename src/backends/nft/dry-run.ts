// `to-nft --dry-run`: the first state synced as a fresh node would sync it, the rules printed,
// nothing changed on the node. The transactions go to an empty network namespace of the run's own
// (scratch-netns.ts), each printed once applied there; where no namespace can be made (no
// CAP_SYS_ADMIN, say), they are printed as rendered and checked whole with one `nft --check`.

import { sharedSmallSpawner } from "../../host/small-spawner.ts";
import type { LocalState } from "../../model/local.ts";
import type { Logger } from "../../observability/log.ts";
import { NftBackend } from "./backend.ts";
import { CheckingNftRunner, ScratchNftRunner } from "./check-runner.ts";
import type { TableConfig } from "./fragment.ts";
import { ExecNftRunner, type NftRunner } from "./runner.ts";
import { removeLeftoverScratchNetns, ScratchNetns } from "./scratch-netns.ts";

/** The deadline of the one check of the whole ruleset: nft parses it all as one transaction. */
const WHOLE_CHECK_TIMEOUT_MS = 10 * 60_000;

/** Where a dry run's transactions go (the real one below; fakes in tests). */
export interface DryRunHost {
  /**
   * An nft runner inside a new empty namespace, and its removal; throws when none can be made.
   * Namespaces that killed dry runs left are deleted first.
   */
  scratch(log: Logger): Promise<{ readonly runner: NftRunner; remove(): Promise<void> }>;
  /** The runner that checks the whole ruleset when there is no namespace. */
  checker(): NftRunner;
  print(text: string): void;
}

const nodeDryRunHost: DryRunHost = {
  async scratch(log) {
    const kept = await removeLeftoverScratchNetns();
    if (kept.length > 0)
      log.warn({ namespaces: kept }, "could not delete the network namespaces of ended dry runs");
    const netns = await ScratchNetns.create();
    const runner = new ExecNftRunner(netns.command(["nft"]), { spawner: sharedSmallSpawner() });
    return {
      runner,
      async remove() {
        runner.close();
        await netns.remove();
      },
    };
  },
  checker: () => new ExecNftRunner(["nft"], { timeoutMs: WHOLE_CHECK_TIMEOUT_MS }),
  print: (text) => process.stdout.write(text),
};

/**
 * Syncs `tables` to the first state (`firstSync` hands the sync its state) and prints every
 * transaction; rejects with nft's message when nft refuses one. The namespace is removed
 * whatever happens.
 */
export async function dryRun(
  tables: readonly TableConfig[],
  log: Logger,
  firstSync: (sync: (state: LocalState) => Promise<unknown>) => Promise<void>,
  host: DryRunHost = nodeDryRunHost,
): Promise<void> {
  const scratch = await host.scratch(log).catch((err: unknown) => {
    log.warn(
      { err: err instanceof Error ? err.message : String(err) },
      "no network namespace for the dry run; the rules are checked whole with nft --check instead",
    );
    return undefined;
  });
  if (scratch === undefined) {
    const runner = new CheckingNftRunner(host.checker(), host.print);
    const backend = new NftBackend({ runner, tables, log });
    await firstSync((state) => backend.sync(state));
    await runner.verify();
    return;
  }
  try {
    const backend = new NftBackend({ runner: new ScratchNftRunner(scratch.runner, host.print), tables, log });
    await firstSync((state) => backend.sync(state));
  } finally {
    await scratch.remove();
  }
}
