// `… to-local to-nft`: the nftables backend as a CLI sink, and `kpng cleanup nft`.

import type { Command } from "commander";
import { z } from "zod";
import type { CompanionBackend, PreparedCompanion } from "../../backend-core/companion.ts";
import { withFirstState } from "../../backend-core/first-state.ts";
import { watchNodeIPs } from "../../backend-core/node-ips.ts";
import {
  HOST_NETWORK_BINARIES,
  type HostNetwork,
  IpCommandHost,
  primaryAddresses,
} from "../../host/host-network.ts";
import { healthCheckAddresses } from "../../host/listen-addresses.ts";
import { guardServiceRanges, readProtectedAddresses } from "../../host/service-range-guard.ts";
import { addTrafficAddressOptions } from "../../host/traffic-addresses.ts";
import { NODE_SERVICES_BINARIES, NodeServices } from "../../node/node-services.ts";
import {
  addNodeServicesOptions,
  type NodeServicesFlags,
  parseNodeServicesOptions,
} from "../../node/options.ts";
import type { Logger } from "../../observability/log.ts";
import type { LocalSinkPlugin, RawOptions, RunContext } from "../../plugin/contracts.ts";
import { durationFlag, parseOptionsWith, switchFlag } from "../../plugin/options.ts";
import { UsageError } from "../../plugin/usage-error.ts";
import { NftBackend } from "./backend.ts";
import { CheckingNftRunner } from "./check-runner.ts";
import { cleanupTransaction, type NftSettings, TABLE_NAME, tableConfigs } from "./config.ts";
import type { TableConfig } from "./fragment.ts";
import { InteractiveNftRunner } from "./interactive-runner.ts";
import { DEFAULT_TABLE } from "./names.ts";
import { NftRulesProbe } from "./rules-probe.ts";
import { NftRulesReader } from "./rules-reader.ts";
import { ExecNftRunner, NFT_BINARIES } from "./runner.ts";
import { acquireTableLock } from "./table-lock.ts";

const nftOptions = z.object({
  tableName: z
    .string()
    .optional()
    .default(DEFAULT_TABLE)
    .refine((t) => TABLE_NAME.test(t), {
      message: "not a valid nft table name: start with a letter, then letters, digits, _ or -",
    }),
  nodeportAddresses: z.string().optional().default("primary"),
  clusterCidr: z.string().optional().default(""),
  masqueradeAll: switchFlag,
  masqueradeBit: z.string().optional().default("14"),
  dryRun: switchFlag,
  syncPeriod: durationFlag(1000, "it is the periodic resync and the longest retry wait; use 1s or more")
    .optional()
    .default(30_000),
});

type NftOptions = z.output<typeof nftOptions> & {
  readonly settings: NftSettings;
  readonly node: NodeServicesFlags;
};

/** How often the rules are checked for deletion by another program. */
const REPAIR_CHECK_MS = 1000;

/** The deadline of the dry run's one check of the whole ruleset. */
const DRY_RUN_CHECK_TIMEOUT_MS = 10 * 60_000;

/** Checks every to-nft flag, including the address lists, before anything starts. */
function parseNftOptions(raw: RawOptions): NftOptions {
  const opts = parseOptionsWith(nftOptions, raw);
  const settings: NftSettings = {
    table: opts.tableName,
    nodePortAddresses: opts.nodeportAddresses,
    clusterCIDRs: opts.clusterCidr,
    masqueradeAll: opts.masqueradeAll,
    masqueradeBit: opts.masqueradeBit,
  };
  try {
    // The node's own addresses are read later; checking the flags needs none.
    tableConfigs(settings, []);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  return { ...opts, settings, node: parseNodeServicesOptions(raw) };
}

const isPrimary = (settings: NftSettings) => settings.nodePortAddresses.trim() === "primary";

async function configs(settings: NftSettings, host: HostNetwork): Promise<TableConfig[]> {
  const primary = primaryAddresses(await host.defaultRouteInterfaces(), await host.interfaces());
  return tableConfigs(settings, primary);
}

export const toNftPlugin: LocalSinkPlugin<NftOptions> = {
  name: "to-nft",
  description: "program the node's services into nftables (tables ip/ip6 kpng)",
  defaultMinSyncPeriod: "1s",
  binaries: [...NFT_BINARIES, ...HOST_NETWORK_BINARIES, ...NODE_SERVICES_BINARIES],
  addOptions(cmd: Command): void {
    addTrafficAddressOptions(cmd);
    cmd
      .option("--dry-run", "print and check the rules for the first state, change nothing, exit", false)
      .option("--sync-period <duration>", "periodic resync and retry interval", "30s")
      .option("--table-name <name>", "name of kpng's nft tables", DEFAULT_TABLE);
    addNodeServicesOptions(cmd);
  },
  parseOptions: parseNftOptions,
  async run(input, opts, ctx: RunContext): Promise<void> {
    const host = new IpCommandHost();
    const log = ctx.log.child({ component: "nft" });
    const feed = guardServiceRanges(input, await readProtectedAddresses(host), log);
    // "primary" NodePorts answer on the Node object's IPs, as in kube-proxy's nftables mode.
    const nodeIPs = isPrimary(opts.settings) ? await watchNodeIPs(feed, host, ctx.signal) : undefined;
    if (nodeIPs !== undefined && nodeIPs.ips === undefined) return;
    const tables =
      nodeIPs?.ips === undefined
        ? await configs(opts.settings, host)
        : tableConfigs(opts.settings, nodeIPs.ips);
    if (opts.dryRun) {
      // The whole ruleset is checked at once: tens of seconds at 100k Services, not one transaction's.
      const checker = new ExecNftRunner(["nft"], { timeoutMs: DRY_RUN_CHECK_TIMEOUT_MS });
      const runner = new CheckingNftRunner(checker, (text) => process.stdout.write(text));
      const backend = new NftBackend({ runner, tables, log });
      await withFirstState(feed, ctx.signal, (state) => backend.sync(state)).finally(() => nodeIPs?.stop());
      await runner.verify();
      return;
    }
    // One backend per table: a second one would undo the first's changes (exit 2, naming the holder).
    const lock = await acquireTableLock(opts.tableName);
    // Small incremental transactions go through one long-lived `nft -i`; the rest to `nft -f -`.
    const runner = new InteractiveNftRunner({
      fallback: new ExecNftRunner(),
      onRestart: (reason) => log.warn({ reason }, "restarting nft -i; this transaction goes to nft -f"),
    });
    log.info(
      {
        tables: tables.map((t) => `${t.family} ${t.table}`),
        nodePorts: tables.flatMap((t) => t.nodePortCIDRs),
        ...(nodeIPs && { nodeIPsFrom: nodeIPs.from === "node" ? "Node object" : "default-route interfaces" }),
      },
      "starting",
    );
    const syncPeriodMs = opts.syncPeriod;
    const hostIPs = (await host.interfaces()).flatMap((i) => i.addresses.map((a) => a.ip));
    const node = await NodeServices.start(opts.node, {
      mode: "nftables",
      families: ["IPv4", "IPv6"],
      syncPeriodMs,
      healthCheckAddresses: healthCheckAddresses(
        tables.flatMap((t) => t.nodePortCIDRs),
        hostIPs,
      ),
      log: ctx.log.child({ component: "node" }),
    }).catch(async (err: unknown) => {
      nodeIPs?.stop();
      runner.close();
      await lock.release();
      throw err;
    });
    const backend = new NftBackend({
      runner,
      tables,
      log,
      syncPeriodMs,
      observer: node,
      probe: new NftRulesProbe(tables),
      probeIntervalMs: REPAIR_CHECK_MS,
    });
    const restart = new AbortController();
    let changedTo: readonly string[] | undefined;
    void nodeIPs?.changed.then((ips) => {
      changedTo = ips;
      log.error(
        { was: nodeIPs.ips, now: ips },
        "the node's IPs changed: exiting so that NodePorts answer on the new ones at restart",
      );
      restart.abort();
    });
    try {
      await backend.run(feed, AbortSignal.any([ctx.signal, restart.signal]));
    } finally {
      nodeIPs?.stop();
      // Graceful stop: the servers close, the rules stay in place.
      await node.close();
      runner.close();
      await lock.release();
    }
    if (changedTo !== undefined && !ctx.signal.aborted)
      throw new Error(
        `the node's IPs changed to ${changedTo.join(", ")}: restart to serve NodePorts on them`,
      );
  },
  async rulesReader(opts) {
    return new NftRulesReader(await configs(opts.settings, new IpCommandHost()));
  },
  async cleanup(opts, ctx): Promise<void> {
    const table = opts.tableName;
    await new ExecNftRunner().run(cleanupTransaction(table));
    ctx.log.info({ table }, "removed kpng nft tables");
  },
};

/**
 * The companion's tables: the node's own TCP and UDP is balanced in its sockets by the other
 * backend, so they hold the paths of traffic from other machines (and what the sockets pass on).
 */
async function companionConfigs(settings: NftSettings, host: HostNetwork): Promise<TableConfig[]> {
  return (await configs(settings, host)).map((t) => ({ ...t, socketBalanced: true }));
}

/** The table lock, the runner and the node's addresses: to-nft without its node services. */
async function prepareNft(opts: NftOptions, log: Logger): Promise<PreparedCompanion> {
  const host = new IpCommandHost();
  const tables = await companionConfigs(opts.settings, host);
  const hostIPs = (await host.interfaces()).flatMap((i) => i.addresses.map((a) => a.ip));
  const protectedAddresses = await readProtectedAddresses(host);
  // One backend per table: a second one would undo the first's changes (exit 2, naming the holder).
  const lock = await acquireTableLock(opts.tableName);
  const runner = new InteractiveNftRunner({
    fallback: new ExecNftRunner(),
    onRestart: (reason) => log.warn({ reason }, "restarting nft -i; this transaction goes to nft -f"),
  });
  const nodePortCIDRs = tables.flatMap((t) => t.nodePortCIDRs);
  log.info({ tables: tables.map((t) => `${t.family} ${t.table}`), nodePorts: nodePortCIDRs }, "starting");
  return {
    nodePortCIDRs,
    hostIPs,
    async run(input, signal, observer) {
      const backend = new NftBackend({
        runner,
        tables,
        log,
        syncPeriodMs: opts.syncPeriod,
        observer,
        probe: new NftRulesProbe(tables),
        probeIntervalMs: REPAIR_CHECK_MS,
      });
      await backend.run(guardServiceRanges(input, protectedAddresses, log), signal);
    },
    async close() {
      runner.close();
      await lock.release();
    },
  };
}

/** to-nft as the companion of another backend in the same process (to-ebpf's external traffic). */
export const nftCompanion: CompanionBackend<NftOptions> = {
  binaries: toNftPlugin.binaries,
  addOptions: (cmd) => toNftPlugin.addOptions(cmd),
  parseOptions: parseNftOptions,
  settings: (o) => ({ node: o.node, syncPeriodMs: o.syncPeriod, dryRun: o.dryRun }),
  prepare: (o, ctx) => prepareNft(o, ctx.log.child({ component: "nft" })),
  async inspect(o) {
    const host = new IpCommandHost();
    const tables = await companionConfigs(o.settings, host);
    const hostIPs = (await host.interfaces()).flatMap((i) => i.addresses.map((a) => a.ip));
    return {
      nodePortCIDRs: tables.flatMap((t) => t.nodePortCIDRs),
      hostIPs,
      rules: new NftRulesReader(tables),
    };
  },
  cleanup: (o, ctx) => toNftPlugin.cleanup!(o, ctx),
};
