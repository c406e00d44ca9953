// eBPF backend programming time, with the real kernel maps and programs on a private bpffs and
// cgroup (under /run, removed afterwards):
//   cold    N ClusterIP Services × 10 endpoints from a local state to programmed maps: bpftool
//           creates the maps and loads and attaches the programs, then every Service is rendered
//           and written with batch syscalls; wall time and the process's peak RSS;
//   change  one endpoint change at that size: local state to map (render + write), p50/p99.
// Needs root and build/kpng.bpf.o (npm run build:bpf).
//   node bench/ebpf-sync.ts [--quick] [--sizes=10000,100000] [--changes=200]

import { existsSync } from "node:fs";
import { resourceUsage } from "node:process";
import { fileURLToPath } from "node:url";
import { EbpfBackend } from "../src/backends/ebpf/backend.ts";
import { PinnedMaps } from "../src/backends/ebpf/maps.ts";
import { BpftoolLoader } from "../src/backends/ebpf/programs.ts";
import type { LocalService, LocalState } from "../src/model/local.ts";
import { ServiceChangeLog } from "../src/model/local-changes.ts";
import { silentLogger } from "../src/observability/log.ts";
import { mountBpf } from "../tools/netns/bpf-mounts.ts";
import { quantile } from "./lib/nft-netns.ts";
import { svc } from "./lib/services.ts";
import { flagValue, sizesFlag, table } from "./lib/table.ts";

const quick = process.argv.includes("--quick");
const SIZES = sizesFlag(quick ? [1000] : [10_000, 100_000]);
const CHANGES = Number(flagValue("changes") ?? (quick ? 20 : 200));
const ENDPOINTS = 10;
const WARMUP = 20;
const OBJECT = fileURLToPath(new URL("../build/kpng.bpf.o", import.meta.url));

if (process.getuid?.() !== 0 || !existsSync(OBJECT)) {
  console.log("ebpf-sync: skipped (needs root and build/kpng.bpf.o: npm run build:bpf)");
  process.exit(0);
}

const rows: string[][] = [];
for (const n of SIZES) {
  const mounts = await mountBpf();
  const loader = new BpftoolLoader({
    bpfRoot: mounts.bpfRoot,
    cgroupRoot: mounts.clients,
    object: OBJECT,
    serviceEntries: Math.max(262_144, 2 * n),
    backendEntries: Math.max(2_097_152, 2 * n * ENDPOINTS),
    affinityEntries: 65_536,
    reverseEntries: 65_536,
  });
  try {
    const log = new ServiceChangeLog();
    const services = new Map<string, LocalService>();
    for (let i = 0; i < n; i++) services.set(`bench/svc-${i}`, svc(i, 0, ENDPOINTS));
    log.record(1, new Set(services.keys()));
    let state: LocalState = { node: "bench", revision: 1, services, serviceCIDRs: [], changeLog: log };
    const backend = new EbpfBackend({
      loader,
      openMaps: () => new PinnedMaps(mounts.bpfRoot),
      render: { nodePortIPs: [] },
      log: silentLogger,
    });
    globalThis.gc?.();
    const t0 = performance.now();
    // Maps created, programs loaded and attached (bpftool); the sync's own check then finds them.
    await loader.ensure();
    const t1 = performance.now();
    const cpu0 = process.cpuUsage();
    const cold = await backend.sync(state);
    const t2 = performance.now();
    const cpu = process.cpuUsage(cpu0);
    const rssMiB = resourceUsage().maxRSS / 1024;

    const changes: number[] = [];
    // The first rounds warm the JIT up and are not counted.
    for (let r = -WARMUP; r < CHANGES; r++) {
      const i = ((((r + WARMUP) * 7919) % n) + n) % n;
      const key = `bench/svc-${i}`;
      const next = new Map(state.services);
      next.set(key, svc(i, r + WARMUP + 1, ENDPOINTS));
      log.record(state.revision + 1, new Set([key]));
      state = { ...state, revision: state.revision + 1, services: next };
      const c0 = performance.now();
      const report = await backend.sync(state);
      if (r >= 0) changes.push(performance.now() - c0);
      if (process.env.KPNG_BENCH_TRACE) console.log(`change ${r}: ${changes.at(-1)?.toFixed(3)} ms`);
      // One Service changed: its list goes to fresh slots, nothing else is written.
      if (report.backendsWritten !== ENDPOINTS) throw new Error(`wrote ${report.backendsWritten} slots`);
    }
    rows.push([
      String(n),
      String(cold.backendsWritten),
      ((t1 - t0) / 1000).toFixed(2),
      ((t2 - t1) / 1000).toFixed(2),
      ((cpu.user + cpu.system) / 1e6).toFixed(2),
      ((t2 - t0) / 1000).toFixed(2),
      rssMiB.toFixed(0),
      quantile(changes, 0.5).toFixed(3),
      quantile(changes, 0.99).toFixed(3),
    ]);
  } finally {
    await loader.remove();
    await mounts.destroy();
  }
}
console.log(
  table(
    [
      "services",
      "backend slots",
      "load+attach (s)",
      "render+write (s)",
      "render+write CPU (s)",
      "cold total (s)",
      "peak RSS (MiB)",
      "change p50 (ms)",
      "change p99 (ms)",
    ],
    rows,
  ),
);
