// `… to-local to-iptables`: the iptables backend as a CLI sink, and `kpng cleanup iptables`.

import type { Command } from "commander";
import { z } from "zod";
import { familySettings } from "../../backend-core/family-settings.ts";
import { withFirstState } from "../../backend-core/first-state.ts";
import {
  followNode,
  type NodeFacts,
  rulesAddresses,
  rulesChanged,
  startNodeWatch,
} from "../../backend-core/node-watch.ts";
import { HOST_NETWORK_BINARIES, IpCommandHost, primaryAddresses } from "../../host/host-network.ts";
import { guardServiceRanges, readProtectedAddresses } from "../../host/service-range-guard.ts";
import { type SmallSpawner, sharedSmallSpawner } from "../../host/small-spawner.ts";
import {
  addTrafficAddressOptions,
  detectLocalMode,
  type TrafficAddressSettings,
  trafficAddresses,
  trafficAddressFlags,
  trafficSettings,
} from "../../host/traffic-addresses.ts";
import type { IPFamily } from "../../model/kube.ts";
import type { LocalState } from "../../model/local.ts";
import { applySysctls, ProcSysctlFiles } from "../../node/conntrack/sysctls.ts";
import { NODE_SERVICES_BINARIES, NodeServices } from "../../node/node-services.ts";
import {
  addNodeServicesOptions,
  type NodeServicesFlags,
  parseNodeServicesOptions,
} from "../../node/options.ts";
import type { LocalSinkPlugin, RawOptions, RunContext } from "../../plugin/contracts.ts";
import { durationFlag, parseOptionsWith, switchFlag } from "../../plugin/options.ts";
import { UsageError } from "../../plugin/usage-error.ts";
import { IptablesBackend } from "./backend.ts";
import { cleanupTableText } from "./cleanup.ts";
import { PacketCounters } from "./packet-counters.ts";
import { IptablesRulesReader } from "./rules-reader.ts";
import { ExecIptablesRunner, IPTABLES_BINARIES, type IptablesRunner, type Variant } from "./runner.ts";
import { detectVariant } from "./variant.ts";

type IptablesMode = "auto" | Variant;

/**
 * Whether forwarded INVALID packets are dropped: as kube-proxy, unless TCP conntrack is liberal
 * (asked for, or already set on the node).
 */
async function dropsInvalid(opts: IptablesFlags): Promise<boolean> {
  if (opts.node.conntrack.tcpBeLiberal) return false;
  const value = await new ProcSysctlFiles().read(TCP_BE_LIBERAL).catch(() => "0");
  return value.trim() !== "1";
}

const TCP_BE_LIBERAL = "net/netfilter/nf_conntrack_tcp_be_liberal";

/** Lets packets to 127.0.0.1 be DNATed to another host: localhost NodePorts need it. */
const ROUTE_LOCALNET = { name: "net/ipv4/conf/all/route_localnet", value: 1 };

const iptablesFlags = z.object({
  iptablesMode: z
    .enum(["auto", "nft", "legacy"], { error: (i) => `"${String(i.input)}" is not one of auto, nft, legacy` })
    .optional()
    .default("auto"),
  ...trafficAddressFlags,
  localhostNodeports: switchFlag,
  dryRun: switchFlag,
  syncPeriod: durationFlag(1000, "use 1s or more").optional().default(30_000),
  canaryInterval: durationFlag(100, "use 0.1s or more").optional().default(2000),
});

type IptablesFlags = TrafficAddressSettings & {
  readonly localhostNodePorts: boolean;
  readonly dryRun: boolean;
  readonly mode: IptablesMode;
  readonly syncPeriodMs: number;
  readonly canaryIntervalMs: number;
  readonly node: NodeServicesFlags;
};

/** Pure: the typed options, or a UsageError naming the flag. */
export function parseIptablesOptions(raw: RawOptions): IptablesFlags {
  const f = parseOptionsWith(iptablesFlags, raw);
  const traffic = trafficSettings(f);
  try {
    // The node's own addresses are read later; checking the flags needs none.
    trafficAddresses(traffic, []);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  return {
    ...traffic,
    localhostNodePorts: f.localhostNodeports,
    dryRun: f.dryRun,
    mode: f.iptablesMode,
    syncPeriodMs: f.syncPeriod,
    canaryIntervalMs: f.canaryInterval,
    node: parseNodeServicesOptions(raw),
  };
}

/** The runner of `mode`'s variant; with `spawner`, its commands are started by the small process. */
async function runnerFor(mode: IptablesMode, spawner?: SmallSpawner): Promise<IptablesRunner> {
  const options = spawner === undefined ? {} : { spawner };
  if (mode !== "auto") return new ExecIptablesRunner(mode, options);
  const variant = await detectVariant({
    nft: new ExecIptablesRunner("nft", options),
    legacy: new ExecIptablesRunner("legacy", options),
  });
  return new ExecIptablesRunner(variant, options);
}

/** Prints the restore input for the first state and checks it with `iptables-restore --test`. */
async function dryRun(state: LocalState, backend: IptablesBackend, runner: IptablesRunner): Promise<void> {
  const texts = backend.plan(state);
  const families: IPFamily[] = ["IPv4", "IPv6"];
  for (const [i, text] of texts.entries()) {
    process.stdout.write(`# ${families[i]}\n${text}`);
    await runner.restore(families[i] ?? "IPv4", text, { test: true });
  }
}

export const toIptablesPlugin: LocalSinkPlugin<IptablesFlags> = {
  name: "to-iptables",
  description: "program the node's services into iptables (KPNG- chains; iptables-nft or -legacy)",
  defaultMinSyncPeriod: "1s",
  binaries: [...IPTABLES_BINARIES, ...HOST_NETWORK_BINARIES, ...NODE_SERVICES_BINARIES],
  // The chain names are fixed: one to-iptables per process.
  owns: () => [{ what: "the KPNG- chains of iptables", fix: "run one to-iptables sink per process" }],
  addOptions(cmd: Command): void {
    addTrafficAddressOptions(cmd);
    cmd
      .option("--dry-run", "print and check the rules for the first state, change nothing, exit", false)
      .option("--sync-period <duration>", "full resync interval (also the longest retry backoff)", "30s")
      .option("--canary-interval <duration>", "how often to check that the tables were not flushed", "2s")
      .option(
        "--localhost-nodeports",
        "accept IPv4 NodePort traffic on 127.0.0.1 too (sets route_localnet, as kube-proxy's iptables mode)",
        false,
      )
      .option(
        "--iptables-mode <mode>",
        "auto (the variant already holding Kubernetes rules, else nft), nft or legacy",
        "auto",
      );
    addNodeServicesOptions(cmd);
  },
  parseOptions: parseIptablesOptions,
  async run(input, opts, ctx: RunContext): Promise<void> {
    const spawner = sharedSmallSpawner();
    const host = new IpCommandHost(spawner);
    const runner = await runnerFor(opts.mode, spawner);
    const log = ctx.log.child({ component: "iptables" });
    const feed = guardServiceRanges(input, await readProtectedAddresses(host), log);
    // NodeCIDR: the pod CIDRs are the Node's, from the first state on.
    const followed = await startNodeWatch(feed, host, ctx.signal, log, {
      ips: false,
      podCIDRs: detectLocalMode(opts) === "NodeCIDR",
    });
    if (followed === undefined) return;
    const { watch } = followed;
    const dropInvalid = await dropsInvalid(opts);
    const familiesOf = (facts: NodeFacts) =>
      familySettings(opts, facts.primaryIPs, facts.podCIDRs).map((f) => ({ ...f, dropInvalid }));
    const families = familiesOf(watch.current());
    if (opts.localhostNodePorts && !opts.dryRun)
      await applySysctls([ROUTE_LOCALNET], new ProcSysctlFiles(), log);
    const settings = {
      runner,
      families,
      log,
      syncPeriodMs: opts.syncPeriodMs,
      canaryIntervalMs: opts.canaryIntervalMs,
    };
    if (opts.dryRun) {
      const backend = new IptablesBackend(settings);
      await withFirstState(feed, ctx.signal, (state) => dryRun(state, backend, runner)).finally(
        followed.stop,
      );
      return;
    }
    log.info(
      {
        variant: runner.variant,
        nodePorts: families.flatMap((f) => f.nodePortCIDRs),
        podCIDRs: families.flatMap((f) => f.podCIDRs),
        ...(families[0]?.podInterface && { podInterface: families[0].podInterface }),
      },
      "starting",
    );
    // Health, metrics, healthCheckNodePorts and conntrack cleanup are the node services'; a
    // flush of the rules is noticed by the backend's probe (the shared sync loop runs it).
    const node = await NodeServices.start(opts.node, {
      mode: "iptables",
      families: ["IPv4", "IPv6"],
      syncPeriodMs: opts.syncPeriodMs,
      healthCheckAddresses: rulesAddresses(opts, watch.current()).healthCheckAddresses,
      log: ctx.log.child({ component: "node" }),
    }).catch((err: unknown) => {
      followed.stop();
      throw err;
    });
    const packetCounters = new PacketCounters(runner, {
      dropInvalid,
      localhostNodePorts: opts.localhostNodePorts,
      log,
    });
    packetCounters.start();
    const backend = new IptablesBackend({ ...settings, observer: node, packetCounters });
    followNode(watch, {
      backend: "iptables",
      log,
      derive: (facts) => rulesAddresses(opts, facts),
      apply(now, facts, was) {
        if (rulesChanged(now, was)) backend.reconfigure(familiesOf(facts));
        void node.healthCheckNodePorts.listenOn(now.healthCheckAddresses);
      },
    });
    try {
      await backend.run(feed, ctx.signal);
    } finally {
      packetCounters.stop();
      followed.stop();
      // Graceful stop: the servers close, the rules stay in place.
      await node.close();
    }
  },
  async rulesReader(opts) {
    const host = new IpCommandHost();
    const interfaces = await host.interfaces();
    const dropInvalid = await dropsInvalid(opts);
    const families = familySettings(
      opts,
      primaryAddresses(await host.defaultRouteInterfaces(), interfaces),
    ).map((f) => ({ ...f, dropInvalid }));
    return new IptablesRulesReader(families, await runnerFor(opts.mode));
  },
  async cleanup(_raw, ctx): Promise<void> {
    for (const variant of ["nft", "legacy"] as const) {
      const runner = new ExecIptablesRunner(variant);
      for (const family of ["IPv4", "IPv6"] as const) {
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
