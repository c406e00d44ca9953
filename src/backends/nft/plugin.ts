// `… to-local to-nft`: the nftables backend as a CLI sink, and `kpng cleanup nft`.

import { type Command, Option } from "commander";
import type { LocalState } from "../../model/local.ts";
import type { LocalSinkPlugin, Options, RunContext } from "../../plugin/contracts.ts";
import { type DurationBounds, parseDuration } from "../../plugin/duration.ts";
import { UsageError } from "../../plugin/usage-error.ts";
import { NftBackend } from "./backend.ts";
import { cleanupTransaction, tableConfigs } from "./config.ts";
import type { TableConfig } from "./fragment.ts";
import { IpCommandHost, primaryAddresses } from "./host.ts";
import { InteractiveNftRunner } from "./interactive-runner.ts";
import { TableMirror } from "./mirror.ts";
import { DEFAULT_TABLE } from "./names.ts";
import { ExecNftRunner, type NftRunner } from "./runner.ts";
import { acquireTableLock } from "./table-lock.ts";
import { packTransactions } from "./transaction.ts";

function str(opts: Options, key: string, fallback: string): string {
  const v = opts[key];
  return typeof v === "string" ? v : fallback;
}

/** Shortest --sync-period: it is also the retry cap; 0 would resync in a busy loop. */
export const MIN_SYNC_PERIOD_MS = 1000;

function duration(opts: Options, key: string, fallback: number, bounds: DurationBounds = {}): number {
  const v = opts[key];
  if (typeof v === "number") return v;
  if (typeof v !== "string") return fallback;
  try {
    return parseDuration(v, bounds);
  } catch (err) {
    throw new UsageError(
      `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}: ${(err as Error).message}`,
    );
  }
}

async function configs(opts: Options): Promise<TableConfig[]> {
  const host = new IpCommandHost();
  const primary = primaryAddresses(await host.defaultRouteInterfaces(), await host.interfaces());
  return tableConfigs(
    {
      table: str(opts, "tableName", DEFAULT_TABLE),
      nodePortAddresses: str(opts, "nodeportAddresses", "primary"),
      clusterCIDRs: str(opts, "clusterCidr", ""),
      masqueradeAll: opts.masqueradeAll === true,
    },
    primary,
  );
}

/** Prints what the first state would apply to fresh tables and checks it with `nft --check`. */
async function dryRun(state: LocalState, tables: readonly TableConfig[], runner: NftRunner): Promise<void> {
  for (const cfg of tables) {
    const plan = new TableMirror(cfg).plan(state, Date.now());
    const txs = packTransactions(plan.units, cfg.family, cfg.table, Number.POSITIVE_INFINITY);
    const text = txs.join("");
    process.stdout.write(text);
    await runner.check(text);
  }
}

export const toNftPlugin: LocalSinkPlugin = {
  name: "to-nft",
  description: "program the node's services into nftables (tables ip/ip6 kpng)",
  defaultMinSyncPeriod: "1s",
  addOptions(cmd: Command): void {
    cmd
      .option(
        "--nodeport-addresses <cidrs>",
        'addresses that accept NodePort traffic: "primary" (the node\'s primary IPs) or a comma list of CIDRs',
        "primary",
      )
      .option(
        "--cluster-cidr <cidrs>",
        "pod CIDRs (comma list, per family): traffic from them is pod traffic",
        "",
      )
      .option("--masquerade-all", "masquerade all traffic to ClusterIPs", false)
      .option("--dry-run", "print and check the rules for the first state, change nothing, exit", false)
      .option("--sync-period <duration>", "periodic resync and retry interval", "30s")
      .addOption(new Option("--table-name <name>", "name of kpng's nft tables").default(DEFAULT_TABLE));
  },
  async run(feed, opts, ctx: RunContext): Promise<void> {
    // Before anything starts: a bad duration is a usage error.
    const syncPeriodMs = duration(opts, "syncPeriod", 30_000, { min: MIN_SYNC_PERIOD_MS });
    const tables = await configs(opts);
    const log = ctx.log.child({ component: "nft" });
    // Small incremental transactions go through one long-lived `nft -i`; the rest to `nft -f -`.
    const runner = new InteractiveNftRunner({
      fallback: new ExecNftRunner(),
      onRestart: (reason) => log.warn({ reason }, "restarting nft -i; this transaction goes to nft -f"),
    });
    if (opts.dryRun === true) {
      // The feed may call the listener before subscribe() returns: only the first state counts.
      let done = false;
      let unsubscribe = () => {};
      await new Promise<void>((resolve, reject) => {
        unsubscribe = feed.subscribe(async (state) => {
          if (done) return;
          done = true;
          await dryRun(state, tables, runner).then(resolve, reject);
        });
        ctx.signal.addEventListener("abort", () => resolve());
      });
      unsubscribe();
      return;
    }
    const lock = await acquireTableLock(str(opts, "tableName", DEFAULT_TABLE));
    log.info(
      {
        tables: tables.map((t) => `${t.family} ${t.table}`),
        nodePorts: tables.flatMap((t) => t.nodePortCIDRs),
      },
      "starting",
    );
    const backend = new NftBackend({
      runner,
      tables,
      log,
      minSyncPeriodMs: duration(opts, "minSyncPeriod", 1000),
      syncPeriodMs,
    });
    try {
      await backend.run(feed, ctx.signal);
    } finally {
      runner.close();
      await lock.release();
    }
  },
  async cleanup(opts, ctx): Promise<void> {
    const table = str(opts, "tableName", DEFAULT_TABLE);
    await new ExecNftRunner().run(cleanupTransaction(table));
    ctx.log.info({ table }, "removed kpng nft tables");
  },
};
