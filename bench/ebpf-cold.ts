// From a cluster file to programmed maps, as the CLI runs it: `kpng file --input <file> to-local
// to-ebpf` in a private network namespace (the nft companion's tables), with a bpffs and cgroup v2
// tree of its own under /run. N Services × 10 endpoints (bench/lib/cluster.ts); each run is read
// from kpng's debug log as the lines arrive:
//   read      the file read ("read the file"): Node started and kpng's modules loaded, then the read
//             (a large JSON List is read and parsed in one pass, a window at a time: then both);
//   store     the file parsed and every object in the store ("store synced");
//   loader    bpftool created the maps, loaded and attached the programs ("BPF programs and maps
//             in place"): started as the sink starts, while the file is read and parsed;
//   maps      both IP families' maps hold the first state ("ebpf maps synced", IPv6 comes last):
//             what connections from the node need. Before it: the brain's first state and the
//             loader, then the two families' writes;
//   companion the nft companion's first ruleset ("ebpf-nftables synced"; to-nft's own: "nftables
//   synced"), started after the maps.
//   idle      then, nothing changing, kpng's own CPU over --idle-s seconds (after 5 s to settle),
//             in per cent of a core: the probes' work, and the processes kpng starts itself
//             (each start forks kpng, at a cost that grows with its memory).
// With --sinks=ebpf,nft the same file also goes through `to-nft` for a side-by-side row. Peak RSS
// (VmHWM) and kpng's own CPU are read when the maps (or nft's rules) are in place.
// Needs root and build/kpng.bpf.o (npm run build:bpf).
//   node bench/ebpf-cold.ts [--quick] [--sizes=10000,100000] [--sinks=ebpf,nft] [--idle-s=30]

import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { mountBpf } from "../tools/netns/bpf-mounts.ts";
import { Topology } from "../tools/netns/topology.ts";
import { kpngOnFile, writeClusterFile } from "./lib/cluster.ts";
import { type Line, LineProcess } from "./lib/line-process.ts";
import { flagValue, sizesFlag, table } from "./lib/table.ts";

const quick = process.argv.includes("--quick");
const SIZES = sizesFlag(quick ? [1000] : [10_000, 100_000]);
const SINKS = (flagValue("sinks") ?? "ebpf").split(",");
const ENDPOINTS = 10;
const COLD_TIMEOUT_MS = 600_000;
const IDLE_S = Number(flagValue("idle-s") ?? (quick ? 5 : 30));
const IDLE_SETTLE_MS = 5000;
const here = fileURLToPath(new URL(".", import.meta.url));
const CLI = join(here, "../src/cli/main.ts");
const OBJECT = join(here, "../build/kpng.bpf.o");

if (process.getuid?.() !== 0 || !existsSync(OBJECT)) {
  console.log("ebpf-cold: skipped (needs root and build/kpng.bpf.o: npm run build:bpf)");
  process.exit(0);
}

const msg = (name: string) => (text: string) => text.includes(`"msg":"${name}"`);
const s = (line: Line | undefined, from: number) =>
  line === undefined ? "-" : ((line.at - from) / 1000).toFixed(2);

interface Run {
  readonly rows: string[];
}

/** kpng's CPU over IDLE_S seconds with nothing changing, in per cent of a core. */
async function idlePercent(kpng: LineProcess): Promise<number> {
  await sleep(IDLE_SETTLE_MS);
  const from = kpng.cpuTimes().selfMs;
  const since = performance.now();
  await sleep(IDLE_S * 1000);
  return ((kpng.cpuTimes().selfMs - from) / (performance.now() - since)) * 100;
}

async function run(topo: Topology, sink: string, n: number, file: string): Promise<Run> {
  // Each run starts from an empty ruleset: the run before left its tables (kpng's rules stay when
  // it stops), and adopting them would measure a restart (bench/nft-restart.ts), not a cold start.
  await topo.node.exec(["nft", "flush", "ruleset"]);
  const mounts = sink === "ebpf" ? await mountBpf() : undefined;
  const load = loadavg()[0]!.toFixed(1);
  const sinkArgs =
    mounts === undefined
      ? ["to-nft"]
      : ["to-ebpf", "--bpf-root", mounts.bpfRoot, "--cgroup-root", mounts.clients];
  const kpng = kpngOnFile(topo.node.name, topo.nodeIPv4, file, sinkArgs);
  try {
    const read = await kpng.waitFor(msg("read the file"), 0, COLD_TIMEOUT_MS);
    const store = await kpng.waitFor(msg("store synced"), 0, COLD_TIMEOUT_MS);
    let mapsStart: Line | undefined;
    let maps: Line | undefined;

    if (mounts !== undefined) {
      mapsStart = await kpng.waitFor(msg("BPF programs and maps in place"), 0, COLD_TIMEOUT_MS);
      maps = await kpng.waitFor(
        (t) => msg("ebpf maps synced")(t) && t.includes('"family":"IPv6"'),
        0,
        COLD_TIMEOUT_MS,
      );
    }
    const atMaps = { rss: kpng.peakRssMiB(), cpu: kpng.cpuTimes() };
    // The companion's sync loop logs under its own backend label.
    const rules = await kpng.waitFor(
      msg(mounts === undefined ? "nftables synced" : "ebpf-nftables synced"),
      0,
      COLD_TIMEOUT_MS,
    );
    const atRules = { rss: kpng.peakRssMiB(), cpu: kpng.cpuTimes() };
    const idle = await idlePercent(kpng);
    const t0 = kpng.startedAt;
    return {
      rows: [
        String(n),
        sink,
        s(read, t0),
        s(store, t0),
        mapsStart === undefined ? "-" : s(mapsStart, t0),
        s(maps, t0),
        maps === undefined
          ? "-"
          : `${atMaps.rss.toFixed(0)} / ${(atMaps.cpu.selfMs / 1000).toFixed(2)} / ${atMaps.cpu.minorFaults}`,
        s(rules, t0),
        `${atRules.rss.toFixed(0)} / ${(atRules.cpu.selfMs / 1000).toFixed(2)} / ${atRules.cpu.minorFaults}`,
        `${idle.toFixed(2)} %`,
        `${load}→${loadavg()[0]!.toFixed(1)}`,
      ],
    };
  } finally {
    await kpng.stop(10_000);
    if (mounts !== undefined) {
      const cleanup = new LineProcess("cleanup", topo.node.name, [
        process.execPath,
        CLI,
        "cleanup",
        "ebpf",
        "--bpf-root",
        mounts.bpfRoot,
        "--cgroup-root",
        mounts.clients,
      ]);
      await cleanup.waitFor(() => false, 0, 60_000).catch(() => undefined);
      await mounts.destroy();
    }
  }
}

const work = mkdtempSync(join(tmpdir(), "kpng-ebpf-cold-"));
const topo = await Topology.create();
const rows: string[][] = [];
try {
  for (const n of SIZES) {
    const file = writeClusterFile({ services: n, endpointsPerService: ENDPOINTS }, work);
    for (const sink of SINKS) rows.push((await run(topo, sink, n, file)).rows);
    rmSync(file);
  }
} finally {
  await topo.destroy();
  rmSync(work, { recursive: true, force: true });
}
console.log(
  `\nebpf-cold: kpng file --input <N Services × ${ENDPOINTS} endpoints> to-local <sink>, seconds from kpng's start (target at 100k: maps ≤ 5 s, ≤ 1 GiB; 10k: ≤ 0.5 s)`,
);
console.log(
  table(
    [
      "services",
      "sink",
      "file read s",
      "store synced s",
      "loader done s",
      "maps programmed s",
      "at maps: peak RSS MiB / kpng CPU s / page faults",
      "nft rules s",
      "at nft: peak RSS MiB / kpng CPU s / page faults",
      `idle ${IDLE_S} s: kpng CPU`,
      "load avg",
    ],
    rows,
  ),
);
