// End to end at scale: the real `kpng` CLI (`<source> to-local to-nft`) programs a private
// network namespace from a cluster of N Services with 10 endpoints each, and we measure:
//   cold       time from starting kpng to its first applied ruleset, once through the kube source
//              (the test API server in a process of its own, listed in pages of 500) and once
//              through the file source (one JSON file); peak RSS (VmHWM) and CPU of kpng and of the
//              nft processes it ran; and the full collection kpng runs right after that first
//              ruleset (its milliseconds, and kpng's CPU once it is done);
//   change     one EndpointSlice change: from the test API server writing the watch MODIFIED to
//              kpng's log line saying the rules are applied (p50/p99 over --changes), and the CPU
//              kpng and its children (nft, conntrack) spent per change over the whole run of
//              changes; the changes start
//              once kpng has settled after its first ruleset (see CHANGE_SETTLE_CPU);
//   dataplane  first-packet latency through the rules: new TCP connections (connect + first line)
//              and UDP request/response from a client pod to different Services' cluster IPs;
//   idle       with nothing changing after the first ruleset (file source), kpng's own CPU and
//              that of the nft processes it ran, over --idle-s (default 90 s: three periodic
//              resyncs of the default 30 s sync period, and the rules probe every second).
// "Applied" is the nft backend's debug line `nftables synced`, written when nft has returned; we read
// it from kpng's stdout as it arrives. --min-sync-period is 0 so no pacing delay is measured.
// Needs root (network namespaces).
//
//   node bench/scale.ts [--quick] [--sizes=1000,100000] [--sections=cold,change,dataplane]
//                       [--sources=kube,file] [--changes=200] [--samples=200] [--cpu-prof]
//                       [--cold-timeout-s=N] [--idle-s=90] [--idle-settle-s=5] [--trace-gc]
//                       [--change-settle-s=120] [--change-gap-ms=100]
// --cpu-prof profiles kpng and prints where the CPU time went, for the cold start and (with the
// change section) for the run of changes on its own, (with the idle section) for the idle window. --trace-gc counts kpng's collections and
// their pauses in the idle and change windows, and lists its mark-compacts up to the first ruleset. KPNG_BENCH_TRACE=1 runs kpng with trace logging and
// prints each change's latency with kpng's lines around it, at their arrival (ms after the watch
// event was written): the watch event read, the sync started, each family's plan, each nft
// transaction rendered and applied, conntrack batches, probes, collections.

import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import type { ProbeRequest } from "../tools/netns/probe.ts";
import { probeFrom } from "../tools/netns/probe-from.ts";
import { Topology } from "../tools/netns/topology.ts";
import {
  BENCH_KPNG_ENV,
  BENCH_KPNG_NODE_FLAGS,
  benchNodeFlags,
  type ClusterShape,
  changedService,
  MAX_PROBED,
  SERVICE_PORTS,
  THIS_NODE,
  writeClusterFile,
} from "./lib/cluster.ts";
import { monotonicUs, type ProfileWindow, summarizeProfile } from "./lib/cpu-profile.ts";
import { type Line, LineProcess, wallMs } from "./lib/line-process.ts";
import { quantile } from "./lib/nft-netns.ts";
import { flagValue, sizesFlag, table } from "./lib/table.ts";

const quick = process.argv.includes("--quick");
const SIZES = sizesFlag([1000, 10_000, 100_000]);
const cpuProf = process.argv.includes("--cpu-prof");
const SECTIONS = new Set((flagValue("sections") ?? (cpuProf ? "cold" : "cold,change,dataplane")).split(","));
const SOURCES = new Set((flagValue("sources") ?? "kube,file").split(","));
const CHANGES = Number(flagValue("changes") ?? (quick ? 20 : 200));
const SAMPLES = Number(flagValue("samples") ?? (quick ? 40 : 200));
const ENDPOINTS = 10;
const IDLE_S = Number(flagValue("idle-s") ?? (quick ? 10 : 90));
/**
 * After the first ruleset, what follows it settles first: stale deletions, the node services,
 * and the collections of the cold start's garbage (a 1.7 GiB heap at 100k).
 */
const IDLE_SETTLE_MS = Number(flagValue("idle-settle-s") ?? 5) * 1000;
/** kpng runs with --trace-gc: the idle and change sections count its collections and their pauses. */
const TRACE_GC = process.argv.includes("--trace-gc");
const GC_LINE = /: (Scavenge|Mark-Compact|Minor Mark-Sweep)\b.*?, ([\d.]+) \/ [\d.]+ ms/;
/** A profiled kpng writes its profile as it exits: give it time (a busy one answers late). */
const STOP_GRACE_MS = cpuProf ? 180_000 : 10_000;
/**
 * Before the changes, kpng finishes what follows its first ruleset (the collections of the cold
 * start's garbage, the first conntrack reconcile): until it uses less than this share of a core
 * over a second, for at most CHANGE_SETTLE_MAX_MS. The changes then measure the steady state.
 */
const CHANGE_SETTLE_CPU = 0.1;
const CHANGE_SETTLE_MAX_MS = Number(flagValue("change-settle-s") ?? 120) * 1000;
/**
 * Each change is written this long (plus up to as much again, at random, so that the changes do
 * not fall in step with the rules probe's second) after the one before it was applied: the work
 * that follows an applied change (the other family, the metrics, a conntrack batch for a removed
 * UDP endpoint) is then over, and each latency is that of one change, as a cluster's changes
 * mostly come. 0 writes each change as soon as the one before is applied: a burst, where a change
 * also waits for what its predecessor left running.
 */
const CHANGE_GAP_MS = Number(flagValue("change-gap-ms") ?? 100);
/** One change not applied in this time ends the changes (counted as done so far). */
const CHANGE_TIMEOUT_MS = 30_000;
/** The changes at one size stop after this long, however many were asked for. */
const CHANGE_BUDGET_MS = 240_000;
/** How long kpng may take to its first ruleset before the run fails. */
const COLD_TIMEOUT_MS = Number(flagValue("cold-timeout-s") ?? Math.max(60, Math.max(...SIZES) / 500)) * 1000;
/**
 * The echo pods' addresses: the endpoints of every probed Service. One address per pod: a UDP
 * server bound to all addresses answers from the pod's first one, which a second address's
 * NATed flow would not match.
 */
const PROBE_ENDPOINTS = ["198.51.100.10", "198.51.100.11"];
/** The probed Services used only to warm up the client (JIT, ARP), not measured. */
const WARMUP = 50;

const here = fileURLToPath(new URL(".", import.meta.url));
const CLI = join(here, "../src/cli/main.ts");
const APISERVER = join(here, "lib/apiserver-main.ts");

/** A wall-clock time (wallMs) of this machine on the clock of CPU profiles (monotonicUs). */
const monotonicOffsetUs = monotonicUs() - wallMs() * 1000;
const profileWindow = (fromWallMs: number, toWallMs: number): ProfileWindow => ({
  fromUs: fromWallMs * 1000 + monotonicOffsetUs,
  toUs: toWallMs * 1000 + monotonicOffsetUs,
});

const isSynced = (text: string) => text.includes('"msg":"nftables synced"');
const revisionOf = (text: string) => Number((JSON.parse(text) as { revision?: number }).revision ?? -1);

interface ColdRun {
  readonly services: number;
  readonly source: string;
  readonly sourceSyncedS: number | undefined;
  /** Undefined when no ruleset was applied within the timeout. */
  readonly rulesInS: number | undefined;
  readonly rssMiB: number;
  readonly kpngCpuS: number;
  readonly kpngPageFaults: number;
  readonly nftCpuS: number;
  /** The full collection kpng runs after its first sync (its debug line), and kpng's CPU with it. */
  readonly afterSync:
    | { readonly collectionMs: number; readonly heapMiB: string; readonly kpngCpuS: number }
    | undefined;
}

interface Kpng {
  readonly process: LineProcess;
  readonly cold: ColdRun;
  /** Undefined when no ruleset was applied within the timeout. */
  readonly firstSync: Line | undefined;
}

function shapeOf(services: number): ClusterShape {
  return {
    services,
    endpointsPerService: ENDPOINTS,
    probed: Math.min(MAX_PROBED, services),
    probeEndpoints: PROBE_ENDPOINTS,
  };
}

async function startKpng(
  topo: Topology,
  services: number,
  source: string,
  sourceArgs: readonly string[],
  profileDir: string | undefined,
): Promise<Kpng> {
  spawnSync("ip", ["netns", "exec", topo.node.name, "nft", "flush", "ruleset"]);
  const node = process.execPath;
  const profile = profileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${profileDir}`];
  const kpng = new LineProcess(
    "kpng",
    topo.node.name,
    [
      node,
      ...profile,
      ...(TRACE_GC ? ["--trace-gc"] : []),
      ...BENCH_KPNG_NODE_FLAGS,
      CLI,
      ...sourceArgs,
      "to-local",
      "to-nft",
      ...benchNodeFlags(topo.nodeIPv4),
    ],
    BENCH_KPNG_ENV,
  );
  // A kpng too slow for the timeout still gets its row (and its profile), marked as such.
  const storeSynced = await kpng
    .waitFor((t) => t.includes('"msg":"store synced"'), 0, COLD_TIMEOUT_MS)
    .catch(() => undefined);
  const firstSync = await kpng
    .waitFor(isSynced, 0, Math.max(1, kpng.startedAt + COLD_TIMEOUT_MS - wallMs()))
    .catch(() => undefined);
  const cpu = kpng.cpuTimes();
  const rssMiB = kpng.peakRssMiB();
  const collected =
    firstSync &&
    (await kpng
      .waitFor((t) => t.includes('"msg":"collected the heap after the first sync"'), firstSync.at, 5000)
      .catch(() => undefined));
  const afterSync = collected && {
    collectionMs: Number(/"ms":(\d+)/.exec(collected.text)?.[1]),
    heapMiB: `${/"heapMiBBefore":(\d+)/.exec(collected.text)?.[1]} → ${/"heapMiBAfter":(\d+)/.exec(collected.text)?.[1]}`,
    kpngCpuS: kpng.cpuTimes().selfMs / 1000,
  };
  if (TRACE_GC)
    for (const line of kpng.timedLines(0)) {
      if (firstSync !== undefined && line.at > firstSync.at) break;
      if (line.text.includes("Mark-Compact"))
        console.log(
          `  cold start +${((line.at - kpng.startedAt) / 1000).toFixed(2)} s: ${line.text.slice(0, 160)}`,
        );
    }
  return {
    process: kpng,
    firstSync,
    cold: {
      services,
      source,
      sourceSyncedS: storeSynced && (storeSynced.at - kpng.startedAt) / 1000,
      rulesInS: firstSync && (firstSync.at - kpng.startedAt) / 1000,
      rssMiB,
      kpngCpuS: cpu.selfMs / 1000,
      kpngPageFaults: cpu.minorFaults,
      // nft runs as a child of kpng's small process (src/host/small-spawner.ts), which reaps it.
      nftCpuS: (cpu.childrenMs + kpng.liveChildrenCpuMs()) / 1000,
      afterSync,
    },
  };
}

interface GcPauses {
  readonly count: number;
  readonly totalMs: number;
  readonly maxMs: number;
}

/** kpng's collections (with --trace-gc) read at or after `since` (wallMs). */
function gcPauses(kpng: LineProcess, since: number): GcPauses {
  const pauses = kpng.lines(since).flatMap((t) => {
    const m = GC_LINE.exec(t);
    return m === null ? [] : [Number(m[2])];
  });
  return {
    count: pauses.length,
    totalMs: pauses.reduce((a, b) => a + b, 0),
    maxMs: Math.max(0, ...pauses),
  };
}

interface ChangeRun {
  readonly services: number;
  readonly ms: number[];
  /** kpng's own CPU over the whole run of changes, divided by the changes. */
  readonly kpngCpuMsPerChange: number;
  /** Its children's likewise: the long-lived `nft -i`, the probe's `nft -c -i`, `conntrack -R` batches. */
  readonly nftCpuMsPerChange: number;
  readonly gc: GcPauses;
  /** How long kpng took to quieten after its first ruleset. */
  readonly settledS: number;
  /** kpng's resident set once the changes are over. */
  readonly rssMiB: number;
  /** When the changes ran: the CPU profile's window. */
  readonly window: { readonly from: number; readonly to: number };
}

/** One EndpointSlice change at a time, each waited for: watch MODIFIED written → rules applied. */
async function measureChanges(
  api: LineProcess,
  kpng: Kpng,
  firstSync: Line,
  shape: ClusterShape,
): Promise<ChangeRun> {
  const settledS = await settle(kpng.process);
  const latencies: number[] = [];
  let revision = revisionOf(firstSync.text);
  const from = wallMs();
  const cpuFrom = kpng.process.cpuTimes();
  const liveFrom = kpng.process.liveChildrenCpuMs();
  const started = performance.now();
  for (let k = 0; k < CHANGES && performance.now() - started < CHANGE_BUDGET_MS; k++) {
    if (CHANGE_GAP_MS > 0) await sleep(CHANGE_GAP_MS * (1 + Math.random()));
    const i = changedService(shape, k);
    const since = wallMs();
    api.write(`change ${i} ${k + 1}`);
    const ack = await api.waitFor((t) => t.startsWith(`changed ${i} `), since, 10_000);
    const at = Number(ack.text.split(" ")[2]);
    const applied = await kpng.process
      .waitFor((t) => isSynced(t) && revisionOf(t) > revision, at, CHANGE_TIMEOUT_MS)
      .catch(() => undefined);
    if (applied === undefined) {
      console.log(`  change ${k} not applied within ${CHANGE_TIMEOUT_MS / 1000} s; no more changes`);
      break;
    }
    revision = revisionOf(applied.text);
    latencies.push(applied.at - at);
    if (process.env.KPNG_BENCH_TRACE) {
      console.log(`  change ${k}: ${(applied.at - at).toFixed(2)} ms`);
      // kpng's own lines of the change, at their arrival (ms after the MODIFIED was written).
      for (const line of kpng.process.timedLines(at - 30)) {
        if (line.at > applied.at + 30) break;
        console.log(`    +${(line.at - at).toFixed(2)} ${line.text.slice(0, 220)}`);
      }
    }
  }
  const to = wallMs();
  const cpuTo = kpng.process.cpuTimes();
  if (TRACE_GC) for (const line of kpng.process.lines(from)) if (GC_LINE.test(line)) console.log(`  ${line}`);
  const n = Math.max(1, latencies.length);
  const nftMs =
    cpuTo.childrenMs - cpuFrom.childrenMs + Math.max(0, kpng.process.liveChildrenCpuMs() - liveFrom);
  return {
    services: shape.services,
    ms: latencies,
    kpngCpuMsPerChange: (cpuTo.selfMs - cpuFrom.selfMs) / n,
    nftCpuMsPerChange: nftMs / n,
    gc: gcPauses(kpng.process, from),
    settledS,
    rssMiB: kpng.process.rssMiB(),
    window: { from, to },
  };
}

/** Waits until kpng uses less than CHANGE_SETTLE_CPU of a core over a second; returns the wait, s. */
async function settle(kpng: LineProcess): Promise<number> {
  const start = wallMs();
  let last = kpng.cpuTimes().selfMs;
  while (wallMs() - start < CHANGE_SETTLE_MAX_MS) {
    await sleep(1000);
    const now = kpng.cpuTimes().selfMs;
    if (now - last < 1000 * CHANGE_SETTLE_CPU) break;
    last = now;
  }
  return (wallMs() - start) / 1000;
}

interface Idle {
  readonly services: number;
  readonly seconds: number;
  /** kpng's own CPU over the window, in % of one core. */
  readonly kpngPercent: number;
  /** The processes it ran in the window (reaped, and the long-lived ones), % of one core. */
  readonly nftPercent: number;
  /** Of which the reaped ones (short commands: `ip`, `nft -f`), and each long-lived one. */
  readonly reapedPercent: number;
  readonly livePercent: ReadonlyMap<string, number>;
  /** The window, for the CPU profile. */
  readonly from: number;
  readonly to: number;
  readonly syncs: number;
  /** With --trace-gc: collections in the window and their main-thread pauses. */
  readonly gcs: number;
  readonly gcPauseMs: number;
}

/** kpng's CPU while nothing changes: the periodic resyncs and the rules probe only. */
async function measureIdle(kpng: Kpng, services: number): Promise<Idle> {
  await sleep(IDLE_SETTLE_MS);
  const from = kpng.process.cpuTimes();
  const liveFrom = kpng.process.liveChildrenCpu();
  const since = wallMs();
  await sleep(IDLE_S * 1000);
  const to = kpng.process.cpuTimes();
  const liveTo = kpng.process.liveChildrenCpu();
  const until = wallMs();
  const window = until - since;
  const livePercent = new Map(
    [...liveTo].map(([name, ms]) => [name, (Math.max(0, ms - (liveFrom.get(name) ?? 0)) / window) * 100]),
  );
  const liveMs = [...livePercent.values()].reduce((a, b) => a + b, 0) * (window / 100);
  if (TRACE_GC)
    for (const line of kpng.process.lines(since)) if (GC_LINE.test(line)) console.log(`  ${line}`);
  const reapedMs = to.childrenMs - from.childrenMs;
  const nftMs = reapedMs + liveMs;
  const gc = gcPauses(kpng.process, since);
  return {
    services,
    seconds: window / 1000,
    kpngPercent: ((to.selfMs - from.selfMs) / window) * 100,
    nftPercent: (nftMs / window) * 100,
    reapedPercent: (reapedMs / window) * 100,
    livePercent,
    from: since,
    to: until,
    syncs: kpng.process.count((t) => t.includes("periodic resync"), since),
    gcs: gc.count,
    gcPauseMs: gc.totalMs,
  };
}

interface DataPlane {
  readonly services: number;
  readonly tcp: number[];
  readonly udp: number[];
  readonly failures: number;
  readonly firstFailure: string;
}

async function measureDataPlane(topo: Topology, shape: ClusterShape): Promise<DataPlane> {
  const probed = shape.probed ?? 0;
  const measured = probed - WARMUP;
  const request = (proto: "tcp" | "udp", i: number): ProbeRequest => ({
    proto,
    host: `203.0.113.${i + 1}`,
    port: proto === "tcp" ? SERVICE_PORTS.tcp : SERVICE_PORTS.udp,
    timeoutMs: 2000,
  });
  const warm = Array.from({ length: WARMUP }, (_, k) => request(k % 2 ? "udp" : "tcp", measured + k));
  const run = async (proto: "tcp" | "udp") => {
    const requests = Array.from({ length: SAMPLES }, (_, k) => request(proto, k % measured));
    // One process for warm-up and samples: its first requests pay for JIT and ARP.
    const results = await probeFrom(topo.client.ns, [...warm, ...requests], { concurrency: 1 });
    return results.slice(WARMUP);
  };
  const tcp = await run("tcp");
  const udp = await run("udp");
  const ok = (rs: typeof tcp) => rs.filter((r) => r.ok).map((r) => r.ms);
  return {
    services: shape.services,
    tcp: ok(tcp),
    udp: ok(udp),
    failures: [...tcp, ...udp].filter((r) => !r.ok).length,
    firstFailure: [...tcp, ...udp]
      .filter((r) => !r.ok)
      .slice(0, 1)
      .map((r) => (r.ok ? "" : `${r.failure}: ${r.message}`))
      .join(""),
  };
}

function printProfile(dir: string, label: string, window?: { from: number; to: number }): void {
  const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
  if (file === undefined) {
    console.log(`${label}: no CPU profile was written`);
    return;
  }
  const s = summarizeProfile(
    join(dir, file),
    15,
    window === undefined ? undefined : profileWindow(window.from, window.to),
  );
  console.log(
    `\nCPU profile of kpng, ${label} (${join(dir, file)}), ${(s.totalMs / 1000).toFixed(1)} s sampled:`,
  );
  console.log(
    table(
      ["layer", "self s", "%"],
      s.byLayer.map(([layer, ms]) => [layer, (ms / 1000).toFixed(2), ((100 * ms) / s.totalMs).toFixed(1)]),
    ),
  );
  console.log(
    `\n${table(
      ["function (top self time)", "layer", "self ms"],
      s.topFunctions.map(([name, layer, ms]) => [name, layer, ms.toFixed(0)]),
    )}`,
  );
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) {
    console.log("scale: skipped (needs root for network namespaces)");
    return;
  }
  const work = mkdtempSync(join(tmpdir(), "kpng-scale-"));
  const topo = await Topology.create({
    pods: PROBE_ENDPOINTS.map((ip, e) => ({
      name: `web-${e}`,
      addresses: [ip],
      echo: { tcpPorts: [8080], udpPorts: [8053] },
    })),
  });
  const cold: ColdRun[] = [];
  const changes: ChangeRun[] = [];
  const dataPlane: DataPlane[] = [];
  const idle: Idle[] = [];
  try {
    for (const n of SIZES) {
      const shape = shapeOf(n);
      if (SOURCES.has("kube") && (SECTIONS.has("cold") || SECTIONS.has("change"))) {
        const api = new LineProcess("test API server", topo.node.name, [
          process.execPath,
          APISERVER,
          String(n),
          String(ENDPOINTS),
          String(shape.probed),
          PROBE_ENDPOINTS.join(","),
        ]);
        try {
          const ready = await api.waitFor((t) => t.startsWith("ready "), 0, 600_000);
          const port = ready.text.split(" ")[1];
          const profileDir = cpuProf ? mkdtempSync(join(tmpdir(), "kpng-prof-kube-")) : undefined;
          const kpng = await startKpng(
            topo,
            n,
            "kube",
            ["kube", "--master", `http://127.0.0.1:${port}`],
            profileDir,
          );
          let changed: ChangeRun | undefined;
          try {
            cold.push(kpng.cold);
            if (SECTIONS.has("change") && kpng.firstSync !== undefined) {
              changed = await measureChanges(api, kpng, kpng.firstSync, shape);
              changes.push(changed);
            }
          } finally {
            await kpng.process.stop(STOP_GRACE_MS);
          }
          if (profileDir) {
            const firstSyncAt = kpng.firstSync?.at ?? wallMs();
            printProfile(profileDir, `kube source, ${n} services, start to first ruleset`, {
              from: 0,
              to: firstSyncAt,
            });
            if (changed !== undefined)
              printProfile(
                profileDir,
                `kube source, ${n} services, ${changed.ms.length} endpoint changes`,
                changed.window,
              );
          }
        } finally {
          await api.stop();
        }
        console.log(`  done kube ${n}`);
      }
      if (
        SOURCES.has("file") &&
        (SECTIONS.has("cold") || SECTIONS.has("dataplane") || SECTIONS.has("idle"))
      ) {
        const file = writeClusterFile(shape, work);
        const profileDir = cpuProf ? mkdtempSync(join(tmpdir(), "kpng-prof-file-")) : undefined;
        const kpng = await startKpng(topo, n, "file", ["file", "--input", file], profileDir);
        try {
          cold.push(kpng.cold);
          if (SECTIONS.has("idle") && kpng.firstSync !== undefined) idle.push(await measureIdle(kpng, n));
          if (SECTIONS.has("dataplane") && kpng.firstSync !== undefined) {
            dataPlane.push(await measureDataPlane(topo, shape));
          }
        } finally {
          await kpng.process.stop(STOP_GRACE_MS);
          rmSync(file);
        }
        if (profileDir) {
          const idleWindow = idle.find((d) => d.services === n);
          printProfile(profileDir, `file source, ${n} services, start to first ruleset`, {
            from: 0,
            to: kpng.firstSync?.at ?? wallMs(),
          });
          if (idleWindow)
            printProfile(profileDir, `file source, ${n} services, idle ${IDLE_S} s`, {
              from: idleWindow.from,
              to: idleWindow.to,
            });
        }
        console.log(`  done file ${n}`);
      }
    }
  } catch (err) {
    // What was measured before the failure is still worth printing.
    report(cold, changes, dataPlane, idle);
    throw err;
  } finally {
    await topo.destroy();
    rmSync(work, { recursive: true, force: true });
  }
  report(cold, changes, dataPlane, idle);
}

const ms = (x: number) => x.toFixed(2);

function report(
  cold: readonly ColdRun[],
  changes: readonly ChangeRun[],
  dataPlane: readonly DataPlane[],
  idle: readonly Idle[],
): void {
  console.log(
    `\nscale: ${ENDPOINTS} endpoints per Service, real nft in a private namespace, node ${THIS_NODE}`,
  );
  if (cold.length > 0) {
    console.log("\ncold start: kpng started → first ruleset applied (target at 100k: ≤ 15 s, ≤ 1.5 GiB)");
    console.log(
      table(
        [
          "services",
          "source",
          "source synced s",
          "rules in s",
          "peak RSS MiB",
          "kpng CPU s",
          "kpng page faults",
          "nft CPU s",
          "collection after sync ms",
          "heap MiB",
          "kpng CPU with it s",
        ],
        cold.map((c) => [
          String(c.services),
          c.source,
          c.sourceSyncedS === undefined ? `>${COLD_TIMEOUT_MS / 1000}` : c.sourceSyncedS.toFixed(2),
          c.rulesInS === undefined ? `>${COLD_TIMEOUT_MS / 1000}` : c.rulesInS.toFixed(2),
          c.rssMiB.toFixed(0),
          c.kpngCpuS.toFixed(2),
          String(c.kpngPageFaults),
          c.nftCpuS.toFixed(2),
          c.afterSync === undefined ? "-" : String(c.afterSync.collectionMs),
          c.afterSync === undefined ? "-" : c.afterSync.heapMiB,
          c.afterSync === undefined ? "-" : c.afterSync.kpngCpuS.toFixed(2),
        ]),
      ),
    );
  }
  if (changes.length > 0) {
    console.log(
      `\none endpoint change: watch MODIFIED written by the API server → rules applied, ${
        CHANGE_GAP_MS > 0
          ? `each ${CHANGE_GAP_MS}–${2 * CHANGE_GAP_MS} ms after the one before (the CPU per change includes the gaps' idle work: the rules probe)`
          : "each as soon as the one before is applied"
      } (target p99 ≤ 15 ms and ≤ 1.5× the 1k p99)`,
    );
    console.log(
      table(
        [
          "services",
          "changes",
          "p50 ms",
          "p99 ms",
          "max ms",
          "kpng CPU ms/change",
          "nft+conntrack CPU ms/change",
          "settled s",
          "RSS after MiB",
          ...(TRACE_GC ? ["GCs", "GC pauses ms", "longest GC ms"] : []),
        ],
        changes.map((c) => [
          String(c.services),
          String(c.ms.length),
          ms(quantile(c.ms, 0.5)),
          ms(quantile(c.ms, 0.99)),
          ms(Math.max(...c.ms)),
          ms(c.kpngCpuMsPerChange),
          ms(c.nftCpuMsPerChange),
          c.settledS.toFixed(0),
          c.rssMiB.toFixed(0),
          ...(TRACE_GC ? [String(c.gc.count), c.gc.totalMs.toFixed(0), c.gc.maxMs.toFixed(1)] : []),
        ]),
      ),
    );
  }
  if (dataPlane.length > 0) {
    console.log(
      "\nfirst packet through the rules, client pod → cluster IP → echo pod (target: equal within 10% of 1k)",
    );
    console.log(
      table(
        [
          "services",
          "TCP conn p50 ms",
          "TCP p99 ms",
          "UDP req/resp p50 ms",
          "UDP p99 ms",
          "samples",
          "failed",
        ],
        dataPlane.map((d) => [
          String(d.services),
          ms(quantile(d.tcp, 0.5)),
          ms(quantile(d.tcp, 0.99)),
          ms(quantile(d.udp, 0.5)),
          ms(quantile(d.udp, 0.99)),
          String(d.tcp.length + d.udp.length),
          String(d.failures),
        ]),
      ),
    );
    for (const d of dataPlane) {
      if (d.failures > 0) console.log(`${d.services} services: first failure: ${d.firstFailure}`);
    }
  }
  if (idle.length > 0) {
    console.log("\nidle: nothing changes after the first ruleset (target at 100k: kpng ≤ 1% of a core)");
    console.log(
      table(
        [
          "services",
          "window s",
          "kpng % of a core",
          "children % of a core",
          "of which reaped (ip, nft -f)",
          "periodic resyncs",
          ...(TRACE_GC ? ["GCs", "GC pauses ms"] : []),
        ],
        idle.map((d) => [
          String(d.services),
          d.seconds.toFixed(0),
          d.kpngPercent.toFixed(2),
          d.nftPercent.toFixed(2),
          d.reapedPercent.toFixed(2),
          String(d.syncs),
          ...(TRACE_GC ? [String(d.gcs), d.gcPauseMs.toFixed(0)] : []),
        ]),
      ),
    );
    for (const d of idle)
      for (const [name, percent] of d.livePercent)
        console.log(`  ${d.services} services, long-lived \`${name}\`: ${percent.toFixed(2)} % of a core`);
  }
}

await main();
