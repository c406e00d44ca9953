// `… to-local to-nft`: the nftables backend as a CLI sink, and `kpng cleanup nft`.

import type { Command } from "commander";
import { z } from "zod";
import type { CompanionBackend, PreparedCompanion } from "../../backend-core/companion.ts";
import { withFirstState } from "../../backend-core/first-state.ts";
import {
  followNode,
  type NodeFacts,
  rulesAddresses,
  rulesChanged,
  startNodeWatch,
  watchNode,
} from "../../backend-core/node-watch.ts";
import { type HostAddresses, watchHostAddresses } from "../../host/address-watch.ts";
import {
  HOST_NETWORK_BINARIES,
  type HostNetwork,
  IpCommandHost,
  primaryAddresses,
} from "../../host/host-network.ts";
import { guardServiceRanges, readProtectedAddresses } from "../../host/service-range-guard.ts";
import { sharedSmallSpawner } from "../../host/small-spawner.ts";
import {
  addTrafficAddressOptions,
  detectLocalMode,
  isPrimary,
  trafficAddressFlags,
  trafficSettings,
} from "../../host/traffic-addresses.ts";
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
import { cleanupTransaction, type NftSettings, TABLE_NAME, tableConfigs } from "./config.ts";
import { dryRun } from "./dry-run.ts";
import type { TableConfig } from "./fragment.ts";
import { InteractiveNftRunner } from "./interactive-runner.ts";
import { DEFAULT_TABLE } from "./names.ts";
import { NftRulesProbe } from "./rules-probe.ts";
import { NftRulesReader } from "./rules-reader.ts";
import { ExecNftRunner, NFT_BINARIES } from "./runner.ts";
import { removeLeftoverScratchNetns, SCRATCH_NETNS_BINARIES } from "./scratch-netns.ts";
import { acquireTableLock } from "./table-lock.ts";

const nftOptions = z.object({
  tableName: z
    .string()
    .optional()
    .default(DEFAULT_TABLE)
    .refine((t) => TABLE_NAME.test(t), {
      message: "not a valid nft table name: start with a letter, then letters, digits, _ or -",
    }),
  ...trafficAddressFlags,
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

/** Checks every to-nft flag, including the address lists, before anything starts. */
function parseNftOptions(raw: RawOptions): NftOptions {
  const opts = parseOptionsWith(nftOptions, raw);
  const settings: NftSettings = { table: opts.tableName, ...trafficSettings(opts) };
  try {
    // The node's own addresses are read later; checking the flags needs none.
    tableConfigs(settings, []);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  return { ...opts, settings, node: parseNodeServicesOptions(raw) };
}

async function configs(settings: NftSettings, host: HostNetwork): Promise<TableConfig[]> {
  const primary = primaryAddresses(await host.defaultRouteInterfaces(), await host.interfaces());
  return tableConfigs(settings, primary);
}

const tablesOf = (settings: NftSettings, facts: NodeFacts) =>
  tableConfigs(settings, facts.primaryIPs, facts.podCIDRs);

export const toNftPlugin: LocalSinkPlugin<NftOptions> = {
  name: "to-nft",
  description: "program the node's services into nftables (tables ip/ip6 kpng)",
  defaultMinSyncPeriod: "1s",
  binaries: [...NFT_BINARIES, ...HOST_NETWORK_BINARIES, ...NODE_SERVICES_BINARIES, ...SCRATCH_NETNS_BINARIES],
  addOptions(cmd: Command): void {
    addTrafficAddressOptions(cmd);
    cmd
      .option("--dry-run", "print and check the rules for the first state, change nothing, exit", false)
      .option("--sync-period <duration>", "periodic resync and retry interval", "30s")
      .option("--table-name <name>", "name of kpng's nft tables", DEFAULT_TABLE);
    addNodeServicesOptions(cmd);
  },
  parseOptions: parseNftOptions,
  owns: (opts) => [
    { what: `nft tables ip/ip6 ${opts.tableName}`, fix: "give one of them another --table-name" },
  ],
  async run(input, opts, ctx: RunContext): Promise<void> {
    const host = new IpCommandHost(sharedSmallSpawner());
    const log = ctx.log.child({ component: "nft" });
    const feed = guardServiceRanges(input, await readProtectedAddresses(host), log);
    const followed = await startNodeWatch(feed, host, ctx.signal, log, {
      ips: isPrimary(opts.settings.nodePortAddresses),
      podCIDRs: detectLocalMode(opts.settings) === "NodeCIDR",
    });
    if (followed === undefined) return;
    const { watch } = followed;
    const tables = tablesOf(opts.settings, watch.current());
    if (opts.dryRun) {
      await dryRun(tables, log, (sync) => withFirstState(feed, ctx.signal, sync).finally(followed.stop));
      return;
    }
    // One backend per table: a second one would undo the first's changes (exit 2, naming the holder).
    const lock = await acquireTableLock(opts.tableName).catch((err: unknown) => {
      followed.stop();
      throw err;
    });
    // Small incremental transactions go through one long-lived `nft -i`; the rest to `nft -f -`.
    const runner = new InteractiveNftRunner({
      fallback: new ExecNftRunner(["nft"], { spawner: sharedSmallSpawner() }),
      onRestart: (reason) => log.warn({ reason }, "restarting nft -i; this transaction goes to nft -f"),
    });
    // Started before the first state makes kpng large: a start forks kpng (small-spawner.ts).
    void runner.prepare();
    log.info(
      {
        tables: tables.map((t) => `${t.family} ${t.table}`),
        nodePorts: tables.flatMap((t) => t.nodePortCIDRs),
        podCIDRs: tables.flatMap((t) => t.podCIDRs),
        ...(tables[0]?.podInterface && { podInterface: tables[0].podInterface }),
        ...(isPrimary(opts.settings.nodePortAddresses) && {
          nodeIPsFrom: watch.current().primaryFrom === "node" ? "Node object" : "default-route interfaces",
        }),
      },
      "starting",
    );
    const syncPeriodMs = opts.syncPeriod;
    const node = await NodeServices.start(opts.node, {
      mode: "nftables",
      families: ["IPv4", "IPv6"],
      syncPeriodMs,
      healthCheckAddresses: rulesAddresses(opts.settings, watch.current()).healthCheckAddresses,
      log: ctx.log.child({ component: "node" }),
    }).catch(async (err: unknown) => {
      followed.stop();
      runner.close();
      await lock.release();
      throw err;
    });
    const probe = rulesProbe(tables, log);
    void probe.prepare();
    const backend = new NftBackend({
      runner,
      tables,
      log,
      syncPeriodMs,
      observer: node,
      probe,
      probeIntervalMs: REPAIR_CHECK_MS,
    });
    followNode(watch, {
      backend: "nftables",
      log,
      derive: (facts) => rulesAddresses(opts.settings, facts),
      apply(now, facts, was) {
        if (rulesChanged(now, was)) backend.reconfigure(tablesOf(opts.settings, facts));
        void node.healthCheckNodePorts.listenOn(now.healthCheckAddresses);
      },
    });
    try {
      await backend.run(feed, ctx.signal);
    } finally {
      followed.stop();
      // Graceful stop: the servers close, the rules stay in place.
      await node.close();
      runner.close();
      probe.close();
      await lock.release();
    }
  },
  async rulesReader(opts) {
    return new NftRulesReader(await configs(opts.settings, new IpCommandHost()));
  },
  async cleanup(opts, ctx): Promise<void> {
    const table = opts.tableName;
    await new ExecNftRunner().run(cleanupTransaction(table));
    ctx.log.info({ table }, "removed kpng nft tables");
    // Those of dry runs that were killed before they deleted them.
    const kept = await removeLeftoverScratchNetns();
    if (kept.length > 0)
      ctx.log.warn({ namespaces: kept }, "could not delete the network namespaces of ended dry runs");
  },
};

function rulesProbe(tables: readonly Pick<TableConfig, "family" | "table">[], log: Logger): NftRulesProbe {
  return new NftRulesProbe(tables, ["nft"], (reason) =>
    log.warn({ reason }, "restarting nft -c -i; this check goes to nft -c -f"),
  );
}

/**
 * The companion's tables: the node's own TCP and UDP is balanced in its sockets by the other
 * backend, so they hold the paths of traffic from other machines (and what the sockets pass on).
 */
async function companionConfigs(settings: NftSettings, host: HostNetwork): Promise<TableConfig[]> {
  return (await configs(settings, host)).map(socketBalanced);
}

function socketBalanced(table: TableConfig): TableConfig {
  return { ...table, socketBalanced: true };
}

/**
 * The table lock, the runner and the node's addresses: to-nft without its node services. The
 * addresses are followed; `run` updates the tables in place when they change.
 */
async function prepareNft(opts: NftOptions, log: Logger, backend: string): Promise<PreparedCompanion> {
  const host = new IpCommandHost(sharedSmallSpawner());
  const addresses = await watchHostAddresses(host, log);
  const protectedAddresses = await readProtectedAddresses(host);
  // One backend per table: a second one would undo the first's changes (exit 2, naming the holder).
  const lock = await acquireTableLock(opts.tableName).catch((err: unknown) => {
    addresses.stop();
    throw err;
  });
  const runner = new InteractiveNftRunner({
    fallback: new ExecNftRunner(["nft"], { spawner: sharedSmallSpawner() }),
    onRestart: (reason) => log.warn({ reason }, "restarting nft -i; this transaction goes to nft -f"),
  });
  // Both long-lived nft processes start now, before the other backend's first state makes kpng
  // large: a start forks kpng (small-spawner.ts). The probe's checks name the tables only.
  void runner.prepare();
  const probe = rulesProbe(
    (["ip", "ip6"] as const).map((family) => ({ family, table: opts.tableName })),
    log,
  );
  void probe.prepare();
  const nodePortCIDRs = (host: HostAddresses) =>
    tableConfigs(opts.settings, host.primary).flatMap((t) => t.nodePortCIDRs);
  log.info(
    {
      tables: ["ip", "ip6"].map((f) => `${f} ${opts.tableName}`),
      nodePorts: nodePortCIDRs(addresses.current),
    },
    "starting",
  );
  return {
    current: () => ({ nodePortCIDRs: nodePortCIDRs(addresses.current), hostIPs: addresses.current.all }),
    subscribe: (listener) => addresses.subscribe(() => listener()),
    async run(input, signal, observer) {
      const feed = guardServiceRanges(input, protectedAddresses, log);
      // NodePorts on the primary addresses of the host (the Node's IPs are for to-ebpf's own
      // node services); the Node's podCIDRs are followed (NodeCIDR).
      const wants = { ips: false, podCIDRs: detectLocalMode(opts.settings) === "NodeCIDR" };
      const watch = await watchNode(feed, addresses, signal, wants);
      if (!watch.started) return;
      const tables = (facts: NodeFacts) => tablesOf(opts.settings, facts).map(socketBalanced);
      const rules = tables(watch.current());
      const rulesBackend = new NftBackend({
        backend,
        runner,
        tables: rules,
        log,
        syncPeriodMs: opts.syncPeriod,
        observer,
        probe,
        probeIntervalMs: REPAIR_CHECK_MS,
      });
      followNode(watch, {
        backend,
        log,
        derive: (facts) => rulesAddresses(opts.settings, facts),
        apply: (now, facts, was) => {
          if (rulesChanged(now, was)) rulesBackend.reconfigure(tables(facts));
        },
      });
      try {
        await rulesBackend.run(feed, signal);
      } finally {
        watch.stop();
      }
    },
    async close() {
      addresses.stop();
      runner.close();
      probe.close();
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
  prepare: (o, ctx, owner) => prepareNft(o, ctx.log.child({ component: "nft" }), `${owner}-nftables`),
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
  owns: (o) => toNftPlugin.owns!(o),
};
