// `… to-local to-ebpf`: socket-level Service balancing from BPF maps for everything the node
// originates, plus the nft backend's rules, driven by the same process, for what the cgroup hooks
// cannot see (traffic arriving from other machines) and for the drops the programs pass on.
// `kpng cleanup ebpf` removes both.

import { fileURLToPath } from "node:url";
import ipaddr from "ipaddr.js";
import { z } from "zod";
import type { LocalState } from "../../model/local.ts";
import { IpCommandHost, primaryAddresses } from "../../node/host-network.ts";
import { healthCheckAddresses } from "../../node/listen-addresses.ts";
import { NodeServices } from "../../node/node-services.ts";
import type { SyncObserver } from "../../node/sync-observer.ts";
import type { LocalSinkPlugin, RawOptions } from "../../plugin/contracts.ts";
import { parseOptionsWith } from "../../plugin/options.ts";
import { UsageError } from "../../plugin/usage-error.ts";
import { NftBackend } from "../nft/backend.ts";
import { cleanupTransaction, tableConfigs } from "../nft/config.ts";
import { InteractiveNftRunner } from "../nft/interactive-runner.ts";
import { type NftOptions, parseNftOptions, toNftPlugin } from "../nft/plugin.ts";
import { NftRulesProbe } from "../nft/rules-probe.ts";
import { ExecNftRunner } from "../nft/runner.ts";
import { acquireTableLock } from "../nft/table-lock.ts";
import { EbpfBackend } from "./backend.ts";
import { defaultCgroupRoot, startupProblems } from "./checks.ts";
import { PinnedMaps } from "./maps.ts";
import { allOf, EbpfProbe } from "./probe.ts";
import { BpftoolLoader, type LoaderSettings } from "./programs.ts";
import { renderService } from "./render.ts";

export const DEFAULT_OBJECT = fileURLToPath(new URL("../../../build/kpng.bpf.o", import.meta.url));

const count = (min: number, max: number) =>
  z.coerce.number().int("a whole number").min(min, `at least ${min}`).max(max, `at most ${max}`);

const ebpfOptions = z.object({
  bpfRoot: z.string().min(1, "a bpffs directory").default("/sys/fs/bpf"),
  cgroupRoot: z.string().min(1, "a cgroup v2 directory").optional(),
  bpfObject: z.string().min(1).default(DEFAULT_OBJECT),
  bpfMapServices: count(1024, 16_777_216).default(262_144),
  bpfMapBackends: count(1024, 67_108_864).default(2_097_152),
});

export type EbpfOptions = { readonly loader: LoaderSettings; readonly nft: NftOptions };

/** How often pins and attachments are checked: the probe repairs within this and one sync. */
const REPAIR_CHECK_MS = 1000;

export function parseEbpfOptions(raw: RawOptions): EbpfOptions {
  const o = parseOptionsWith(ebpfOptions, raw);
  return {
    nft: parseNftOptions(raw),
    loader: {
      bpfRoot: o.bpfRoot,
      cgroupRoot: o.cgroupRoot ?? defaultCgroupRoot(),
      object: o.bpfObject,
      serviceEntries: o.bpfMapServices,
      backendEntries: o.bpfMapBackends,
      affinityEntries: 65_536,
      reverseEntries: 262_144,
    },
  };
}

export const toEbpfPlugin: LocalSinkPlugin<EbpfOptions> = {
  name: "to-ebpf",
  description: "balance the node's own connections to services in BPF (cgroup hooks); nft for the rest",
  defaultMinSyncPeriod: "1s",
  addOptions(cmd) {
    toNftPlugin.addOptions(cmd);
    cmd
      .option("--bpf-root <dir>", "the bpffs mount; kpng pins under <dir>/kpng/", "/sys/fs/bpf")
      .option("--cgroup-root <dir>", "the cgroup v2 tree whose sockets are balanced (default: the host's)")
      .option("--bpf-object <file>", "the compiled programs (npm run build:bpf)", DEFAULT_OBJECT)
      .option("--bpf-map-services <n>", "entries of the frontend map (address, port, protocol)", "262144")
      .option("--bpf-map-backends <n>", "entries of the backend map (twice the endpoints in use)", "2097152");
  },
  parseOptions: parseEbpfOptions,
  async run(feed, opts, ctx) {
    const log = ctx.log.child({ component: "ebpf" });
    const host = new IpCommandHost();
    const interfaces = await host.interfaces();
    const primary = primaryAddresses(await host.defaultRouteInterfaces(), interfaces);
    const tables = tableConfigs(opts.nft.settings, primary);
    const hostIPs = interfaces.flatMap((i) => i.addresses.map((a) => a.ip));
    const nodePortCIDRs = tables.flatMap((t) => t.nodePortCIDRs);
    const render = { nodePortIPs: hostIPs.filter((ip) => inAny(ip, nodePortCIDRs)) };
    const loader = new BpftoolLoader(opts.loader);
    if (opts.nft.dryRun) {
      await firstState(feed, ctx.signal, (state) => {
        for (const [key, svc] of state.services) {
          process.stdout.write(`${JSON.stringify({ service: key, groups: renderService(svc, render) })}\n`);
        }
      });
      return;
    }
    const problems = await startupProblems(opts.loader);
    if (problems.length > 0) throw new UsageError(`to-ebpf cannot run here:\n  ${problems.join("\n  ")}`);

    const lock = await acquireTableLock(opts.nft.tableName);
    const runner = new InteractiveNftRunner({
      fallback: new ExecNftRunner(),
      onRestart: (reason) => log.warn({ reason }, "restarting nft -i; this transaction goes to nft -f"),
    });
    log.info({ ...opts.loader, nodePortIPs: render.nodePortIPs }, "starting");
    let ebpf: EbpfBackend | undefined;
    let nft: NftBackend | undefined;
    const node = await NodeServices.start(opts.nft.node, {
      mode: "ebpf",
      families: ["IPv4", "IPv6"],
      syncPeriodMs: opts.nft.syncPeriod,
      healthCheckAddresses: healthCheckAddresses(nodePortCIDRs, hostIPs),
      log: ctx.log.child({ component: "node" }),
      repair: {
        probe: allOf([new EbpfProbe(loader, log), new NftRulesProbe(tables)]),
        trigger: () => {
          ebpf?.forceFullSync();
          nft?.forceFullSync();
        },
        intervalMs: REPAIR_CHECK_MS,
      },
    }).catch(async (err: unknown) => {
      runner.close();
      await lock.release();
      throw err;
    });
    const [toEbpf, toNft] = jointObservers(node, 2) as [SyncObserver, SyncObserver];
    ebpf = new EbpfBackend({
      loader,
      openMaps: () => new PinnedMaps(opts.loader.bpfRoot),
      render,
      log,
      syncPeriodMs: opts.nft.syncPeriod,
      observer: toEbpf,
    });
    nft = new NftBackend({
      runner,
      tables,
      log: ctx.log.child({ component: "nft" }),
      syncPeriodMs: opts.nft.syncPeriod,
      observer: toNft,
    });
    try {
      await Promise.all([ebpf.run(feed, ctx.signal), nft.run(feed, ctx.signal)]);
    } finally {
      // Graceful stop: programs stay attached, maps and rules stay in place.
      await node.close();
      runner.close();
      await lock.release();
    }
  },
  async cleanup(opts, ctx) {
    const done = await new BpftoolLoader(opts.loader).remove();
    await new ExecNftRunner().run(cleanupTransaction(opts.nft.tableName));
    ctx.log.info({ done, table: opts.nft.tableName }, "removed kpng's BPF programs, pins and nft tables");
  },
};

function inAny(ip: string, cidrs: readonly string[]): boolean {
  const addr = ipaddr.parse(ip);
  return cidrs.some((c) => {
    const [net, bits] = ipaddr.parseCIDR(c);
    return net.kind() === addr.kind() && addr.match(net, bits);
  });
}

/**
 * One observer per backend feeding the same node services: a state counts as synced (health,
 * healthCheckNodePorts, conntrack) once every backend has synced it. A backend that keeps failing
 * (a full map) therefore turns /healthz unhealthy, as a failing nft table does.
 */
export function jointObservers(target: SyncObserver, n: number): SyncObserver[] {
  const revisions = Array.from({ length: n }, () => -1);
  let reported = -1;
  return revisions.map((_, i) => ({
    queued: (state: LocalState) => {
      if (i === 0) target.queued(state);
    },
    async synced(o) {
      revisions[i] = o.state.revision;
      const min = Math.min(...revisions);
      if (min > reported && o.state.revision === min) {
        reported = min;
        await target.synced(o);
      }
    },
    failed: () => target.failed(),
  }));
}

/** Calls `body` with the first state of the feed only. */
async function firstState(
  feed: { subscribe(l: (s: LocalState) => void): () => void },
  signal: AbortSignal,
  body: (state: LocalState) => void,
): Promise<void> {
  let unsubscribe = () => {};
  await new Promise<void>((resolve) => {
    let done = false;
    unsubscribe = feed.subscribe((state) => {
      if (done) return;
      done = true;
      body(state);
      resolve();
    });
    signal.addEventListener("abort", () => resolve());
  });
  unsubscribe();
}
