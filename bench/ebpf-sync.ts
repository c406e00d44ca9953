// eBPF backend programming time (this process runs as bin/kpng runs kpng: bench/lib/as-kpng-runs.ts),
// with the real kernel maps and programs on a private bpffs and
// cgroup (under /run, removed afterwards) and the nft companion in a private network namespace:
//   load+attach  bpftool creates the maps, loads the programs and attaches them;
//   cold         N ClusterIP Services × 10 endpoints from a local state, run as `to-ebpf` runs
//                them: the maps' sync loop first, the nft companion once the maps hold the state.
//                "maps" is when the maps hold every Service (from the start of load+attach: when
//                connections from the node work); "companion" when nft holds its rules. CPU is
//                kpng's (user and system: map syscalls are system time) and the children's (nft,
//                bpftool); wall minus all CPU is time spent waiting (for a core, for I/O);
//   change       one endpoint change at that size: local state to map (render + write of both IP
//                families), p50/p99 of wall time, of the main thread's wait for a core (the
//                scheduler's run delay) and of the rest, its time on a core (the change runs
//                without sleeping): on a loaded machine, wall time is mostly the wait. With the
//                GC pauses that fell inside the measured changes.
// The Services live in the brain's persistent map, so a change costs what it costs in kpng.
// Needs root and build/kpng.bpf.o (npm run build:bpf).
//   node --expose-gc bench/ebpf-sync.ts [--quick] [--sizes=10000,100000] [--changes=200] [--no-companion]

import { existsSync } from "node:fs";
import { loadavg } from "node:os";
import { PerformanceObserver } from "node:perf_hooks";
import { resourceUsage } from "node:process";
import { fileURLToPath } from "node:url";
import { SyncLoop } from "../src/backend-core/sync-loop.ts";
import { EbpfBackend } from "../src/backends/ebpf/backend.ts";
import { chunksOf } from "../src/backends/ebpf/layout.ts";
import { PinnedMaps } from "../src/backends/ebpf/maps.ts";
import { DEFAULT_BACKEND_ENTRIES, untilFirstOutcome } from "../src/backends/ebpf/plugin.ts";
import { BpftoolLoader } from "../src/backends/ebpf/programs.ts";
import { NftBackend } from "../src/backends/nft/backend.ts";
import type { LocalService, LocalState, LocalStateFeed } from "../src/model/local.ts";
import { ServiceChangeLog } from "../src/model/local-changes.ts";
import { PersistentMap } from "../src/model/persistent-map.ts";
import { NO_OBSERVER, type SyncObserver } from "../src/node/sync-observer.ts";
import { silentLogger } from "../src/observability/log.ts";
import { mountBpf } from "../tools/netns/bpf-mounts.ts";
import { runAsKpngRuns } from "./lib/as-kpng-runs.ts";
import { childrenCpuSeconds } from "./lib/child-cpu.ts";
import { BENCH_TABLE, openBenchNetns, quantile } from "./lib/nft-netns.ts";
import { svc } from "./lib/services.ts";
import { flagValue, sizesFlag, table } from "./lib/table.ts";
import { RunDelay } from "./lib/thread-time.ts";

runAsKpngRuns();

const quick = process.argv.includes("--quick");
const SIZES = sizesFlag(quick ? [1000] : [10_000, 100_000]);
const CHANGES = Number(flagValue("changes") ?? (quick ? 20 : 200));
const COMPANION = !process.argv.includes("--no-companion");
const ENDPOINTS = 10;
const WARMUP = 20;
/** The companion at 100k takes tens of seconds in nft; a cold start never takes longer than this. */
const COLD_DEADLINE_MS = 600_000;
const OBJECT = fileURLToPath(new URL("../build/kpng.bpf.o", import.meta.url));

if (process.getuid?.() !== 0 || !existsSync(OBJECT)) {
  console.log("ebpf-sync: skipped (needs root and build/kpng.bpf.o: npm run build:bpf)");
  process.exit(0);
}

const s = (ms: number) => (ms / 1000).toFixed(2);
const load = () => loadavg()[0]!.toFixed(1);

/** Delivers one state to every subscriber, as the brain's feed does at start. */
function feedOf(state: LocalState): LocalStateFeed {
  return {
    subscribe(listener) {
      void listener(state);
      return () => {};
    },
  };
}

/** An observer that records when (and at which process CPU time) the first sync succeeded. */
function firstSync(): { observer: SyncObserver; done: Promise<number>; cpu: Promise<NodeJS.CpuUsage> } {
  const { promise, resolve, reject } = Promise.withResolvers<number>();
  const cpu = Promise.withResolvers<NodeJS.CpuUsage>();
  return {
    done: promise,
    cpu: cpu.promise,
    observer: {
      ...NO_OBSERVER,
      synced: async () => {
        cpu.resolve(process.cpuUsage());
        resolve(performance.now());
      },
      failed: () => reject(new Error("the first sync failed")),
    },
  };
}

const coldRows: string[][] = [];
const changeRows: string[][] = [];
for (const n of SIZES) {
  const mounts = await mountBpf();
  const netns = COMPANION ? openBenchNetns("ebpf-sync") : undefined;
  const loader = new BpftoolLoader({
    bpfRoot: mounts.bpfRoot,
    cgroupRoot: mounts.clients,
    object: OBJECT,
    serviceEntries: Math.max(262_144, 2 * n),
    backendEntries: Math.max(DEFAULT_BACKEND_ENTRIES, 2 * n * chunksOf(ENDPOINTS)),
    affinityEntries: 65_536,
    reverseEntries: 65_536,
  });
  const stop = new AbortController();
  try {
    const log = new ServiceChangeLog();
    const editor = PersistentMap.empty<LocalService>().edit();
    for (let i = 0; i < n; i++) editor.set(`bench/svc-${i}`, svc(i, 0, ENDPOINTS));
    let services = editor.done();
    log.record(1, new Set(services.keys()));
    let state: LocalState = {
      node: "bench",
      revision: 1,
      services,
      serviceCIDRs: { IPv4: [], IPv6: [] },
      changeLog: log,
    };
    const backend = new EbpfBackend({
      loader,
      openMaps: () => new PinnedMaps(mounts.bpfRoot),
      render: { nodePortIPs: { IPv4: [], IPv6: [] } },
      log: silentLogger,
    });
    globalThis.gc?.();
    const loadBefore = load();
    const t0 = performance.now();
    const child0 = childrenCpuSeconds();
    // Maps created, programs loaded and attached (bpftool); the sync's own check then finds them.
    await loader.ensure();
    const t1 = performance.now();
    const attachChildCpu = childrenCpuSeconds() - child0;

    const cpu0 = process.cpuUsage();
    const child1 = childrenCpuSeconds();
    const feed = feedOf(state);
    const maps = firstSync();
    const nft = firstSync();
    const ordered = untilFirstOutcome(maps.observer, stop.signal);
    const mapsLoop = new SyncLoop({
      backend: "ebpf",
      families: backend.asFamilies(),
      log: silentLogger,
      observer: ordered.observer,
    });
    const running = [mapsLoop.run(feed, stop.signal)];
    if (netns !== undefined) {
      const companion = new NftBackend({
        runner: netns.runner,
        tables: [BENCH_TABLE],
        log: silentLogger,
        observer: nft.observer,
      });
      running.push(ordered.first.then(() => companion.run(feed, stop.signal)));
    }
    const deadline = AbortSignal.timeout(COLD_DEADLINE_MS);
    const timedOut = new Promise<never>((_, reject) =>
      deadline.addEventListener("abort", () => reject(new Error("cold start past the deadline"))),
    );
    const mapsAt = await Promise.race([maps.done, timedOut]);
    const nftAt = netns === undefined ? undefined : await Promise.race([nft.done, timedOut]);
    const cpu = process.cpuUsage(cpu0);
    const atMaps = await maps.cpu;
    const mapsCpuSeconds = (atMaps.user + atMaps.system - cpu0.user - cpu0.system) / 1e6;
    const childCpu = childrenCpuSeconds() - child1;
    const wall = (nftAt ?? mapsAt) - t1;
    stop.abort();
    await Promise.all(running);
    const rssMiB = resourceUsage().maxRSS / 1024;
    const kpngCpu = (cpu.user + cpu.system) / 1e6;
    coldRows.push([
      String(n),
      `${s(t1 - t0)} (${attachChildCpu.toFixed(2)})`,
      `${s(mapsAt - t1)} (${mapsCpuSeconds.toFixed(2)})`,
      s(mapsAt - t0),
      nftAt === undefined ? "-" : s(nftAt - t0),
      `${(cpu.user / 1e6).toFixed(2)} + ${(cpu.system / 1e6).toFixed(2)}`,
      childCpu.toFixed(2),
      s(Math.max(0, wall - 1000 * (kpngCpu + childCpu))),
      rssMiB.toFixed(0),
      `${loadBefore}→${load()}`,
    ]);

    // One endpoint change after another, each straight from the local state to the maps.
    const gcPauses: { start: number; ms: number }[] = [];
    const gcs = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) gcPauses.push({ start: e.startTime, ms: e.duration });
    });
    gcs.observe({ entryTypes: ["gc"] });
    const changes: { start: number; ms: number; runMs: number; waitMs: number }[] = [];
    const delay = new RunDelay();
    // The first rounds warm the JIT up and are not counted.
    for (let r = -WARMUP; r < CHANGES; r++) {
      const i = ((((r + WARMUP) * 7919) % n) + n) % n;
      const key = `bench/svc-${i}`;
      services = services.set(key, svc(i, r + WARMUP + 1, ENDPOINTS));
      log.record(state.revision + 1, new Set([key]));
      state = { ...state, revision: state.revision + 1, services };
      const w0 = delay.ms();
      const c0 = performance.now();
      const report = await backend.sync(state);
      const ms = performance.now() - c0;
      const waitMs = delay.ms() - w0;
      if (r >= 0) changes.push({ start: c0, ms, runMs: Math.max(0, ms - waitMs), waitMs });
      if (process.env.KPNG_BENCH_TRACE) console.log(`change ${r}: ${(performance.now() - c0).toFixed(3)} ms`);
      // One Service changed: its list goes to fresh chunks, nothing else is written.
      if (report.backendsWritten !== chunksOf(ENDPOINTS))
        throw new Error(`wrote ${report.backendsWritten} chunks`);
    }
    delay.close();
    // Entries are delivered after the pause: let them arrive.
    await new Promise((r) => setTimeout(r, 50));
    gcs.disconnect();
    const inChanges = gcPauses.filter((g) =>
      changes.some((c) => g.start >= c.start && g.start < c.start + c.ms),
    );
    const ms = changes.map((c) => c.ms);
    const runMs = changes.map((c) => c.runMs);
    const waitMs = changes.map((c) => c.waitMs);
    changeRows.push([
      String(n),
      quantile(ms, 0.5).toFixed(3),
      quantile(ms, 0.99).toFixed(3),
      Math.max(...ms).toFixed(3),
      quantile(runMs, 0.5).toFixed(3),
      quantile(runMs, 0.99).toFixed(3),
      quantile(waitMs, 0.99).toFixed(3),
      String(inChanges.length),
      inChanges.length === 0 ? "-" : Math.max(...inChanges.map((g) => g.ms)).toFixed(3),
      load(),
    ]);
  } finally {
    stop.abort();
    netns?.close();
    await loader.remove();
    await mounts.destroy();
  }
}
console.log(
  table(
    [
      "services",
      "load+attach s (bpftool CPU)",
      "maps write s (kpng CPU)",
      "maps programmed s",
      "companion programmed s",
      "kpng CPU s (user + sys)",
      "children CPU s",
      "waiting s",
      "peak RSS MiB",
      "load avg",
    ],
    coldRows,
  ),
);
console.log();
console.log(
  table(
    [
      "services",
      "change p50 ms",
      "change p99 ms",
      "max ms",
      "on-CPU p50 ms",
      "on-CPU p99 ms",
      "waiting p99 ms",
      "GC pauses in changes",
      "longest GC ms",
      "load avg",
    ],
    changeRows,
  ),
);
