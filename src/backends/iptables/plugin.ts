// `… to-local to-iptables`: the iptables backend as a CLI sink, and `kpng cleanup iptables`.

import type { Command } from "commander";
import type { LocalState } from "../../model/local.ts";
import type { LocalSinkPlugin, Options, RunContext } from "../../plugin/contracts.ts";
import { parseDuration } from "../../plugin/duration.ts";
import { UsageError } from "../../plugin/usage-error.ts";
import type { IpFamily } from "./addresses.ts";
import { IptablesBackend } from "./backend.ts";
import { cleanupTableText } from "./cleanup.ts";
import { familyConfigs, parseCIDRList } from "./config.ts";
import { nodePrimaryAddresses } from "./host.ts";
import { ExecIptablesRunner, type IptablesRunner, type Variant } from "./runner.ts";
import { detectVariant } from "./variant.ts";

export type IptablesMode = "auto" | Variant;

export interface IptablesOptions {
  readonly nodePortAddresses: string;
  readonly clusterCIDRs: string;
  readonly masqueradeAll: boolean;
  readonly dryRun: boolean;
  readonly mode: IptablesMode;
  readonly minSyncPeriodMs: number;
  readonly syncPeriodMs: number;
  readonly canaryIntervalMs: number;
}

function str(raw: Record<string, unknown>, key: string, fallback: string): string {
  const v = raw[key];
  return typeof v === "string" ? v : fallback;
}

function duration(raw: Record<string, unknown>, key: string, flag: string, fallback: number): number {
  const v = raw[key];
  if (typeof v === "number") return v;
  if (typeof v !== "string") return fallback;
  try {
    return parseDuration(v);
  } catch {
    throw new UsageError(`${flag}: "${v}" is not a duration (e.g. 500ms, 30s, 1m)`);
  }
}

/** Pure: the typed options, or a UsageError naming the flag. */
export function parseIptablesOptions(raw: Record<string, unknown>): IptablesOptions {
  const mode = str(raw, "iptablesMode", "auto");
  if (mode !== "auto" && mode !== "nft" && mode !== "legacy")
    throw new UsageError(`--iptables-mode: "${mode}" is not one of auto, nft, legacy`);
  const nodePortAddresses = str(raw, "nodeportAddresses", "primary");
  const clusterCIDRs = str(raw, "clusterCidr", "");
  try {
    if (nodePortAddresses.trim() !== "primary") parseCIDRList(nodePortAddresses, "--nodeport-addresses");
    parseCIDRList(clusterCIDRs, "--cluster-cidr");
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  return {
    nodePortAddresses,
    clusterCIDRs,
    masqueradeAll: raw.masqueradeAll === true,
    dryRun: raw.dryRun === true,
    mode,
    minSyncPeriodMs: duration(raw, "minSyncPeriod", "--min-sync-period", 1000),
    syncPeriodMs: duration(raw, "syncPeriod", "--sync-period", 30_000),
    canaryIntervalMs: duration(raw, "canaryInterval", "--canary-interval", 2000),
  };
}

async function runnerFor(mode: IptablesMode): Promise<IptablesRunner> {
  if (mode !== "auto") return new ExecIptablesRunner(mode);
  const variant = await detectVariant({
    nft: new ExecIptablesRunner("nft"),
    legacy: new ExecIptablesRunner("legacy"),
  });
  return new ExecIptablesRunner(variant);
}

/** Prints the restore input for the first state and checks it with `iptables-restore --test`. */
async function dryRun(state: LocalState, backend: IptablesBackend, runner: IptablesRunner): Promise<void> {
  const texts = backend.plan(state);
  const families: IpFamily[] = ["ipv4", "ipv6"];
  for (const [i, text] of texts.entries()) {
    process.stdout.write(`# ${families[i]}\n${text}`);
    await runner.restore(families[i] ?? "ipv4", text, { test: true });
  }
}

export const toIptablesPlugin: LocalSinkPlugin = {
  name: "to-iptables",
  description: "program the node's services into iptables (KPNG- chains; iptables-nft or -legacy)",
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
      .option("--sync-period <duration>", "full resync interval (also the longest retry backoff)", "30s")
      .option("--canary-interval <duration>", "how often to check that the tables were not flushed", "2s")
      .option(
        "--iptables-mode <mode>",
        "auto (the variant already holding Kubernetes rules, else nft), nft or legacy",
        "auto",
      );
  },
  async run(feed, raw: Options, ctx: RunContext): Promise<void> {
    const opts = parseIptablesOptions(raw);
    const families = familyConfigs(opts, await nodePrimaryAddresses());
    const runner = await runnerFor(opts.mode);
    const log = ctx.log.child({ component: "iptables" });
    const backend = new IptablesBackend({
      runner,
      families,
      log,
      minSyncPeriodMs: opts.minSyncPeriodMs,
      syncPeriodMs: opts.syncPeriodMs,
      canaryIntervalMs: opts.canaryIntervalMs,
    });
    if (opts.dryRun) {
      // The feed may call the listener before subscribe() returns: only the first state counts.
      let done = false;
      let unsubscribe = () => {};
      await new Promise<void>((resolve, reject) => {
        unsubscribe = feed.subscribe(async (state) => {
          if (done) return;
          done = true;
          await dryRun(state, backend, runner).then(resolve, reject);
        });
        ctx.signal.addEventListener("abort", () => resolve());
      });
      unsubscribe();
      return;
    }
    log.info({ variant: runner.variant, nodePorts: families.flatMap((f) => f.nodePortCIDRs) }, "starting");
    await backend.run(feed, ctx.signal);
  },
  async cleanup(_raw, ctx): Promise<void> {
    for (const variant of ["nft", "legacy"] as const) {
      const runner = new ExecIptablesRunner(variant);
      for (const family of ["ipv4", "ipv6"] as const) {
        for (const table of ["filter", "nat", "mangle"] as const) {
          const saved = await runner.save(family, table).catch(() => "");
          const text = cleanupTableText(table, saved);
          if (text === "") continue;
          await runner.restore(family, text);
          ctx.log.info({ variant, family, table }, "removed kpng iptables chains");
        }
      }
    }
  },
};
