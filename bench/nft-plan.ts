// The nft backend's own cost, without the kernel: the plan (render every service, diff against
// the mirror) and the transaction text of a cold start, then of one endpoint change, for N
// ClusterIP Services with 10 endpoints each; CPU time and the heap the backend keeps. The nft
// process's share is in nft-sync.ts and scale.ts.
//   node --expose-gc bench/nft-plan.ts [--sizes=1000,10000,100000] [--quick]

import { NftBackend } from "../src/backends/nft/backend.ts";
import type { NftRunner } from "../src/backends/nft/runner.ts";
import type { LocalService } from "../src/model/local.ts";
import { ServiceChangeLog } from "../src/model/local-changes.ts";
import { PersistentMap } from "../src/model/persistent-map.ts";
import { silentLogger } from "../src/observability/log.ts";
import { BENCH_TABLE } from "./lib/nft-netns.ts";
import { svc } from "./lib/services.ts";

const quick = process.argv.includes("--quick");
const sizesArg = process.argv.find((a) => a.startsWith("--sizes="));
const SIZES = sizesArg
  ? sizesArg.slice("--sizes=".length).split(",").map(Number)
  : quick
    ? [1000]
    : [1000, 10_000, 100_000];
const ENDPOINTS = 10;
const CHANGES = quick ? 20 : 200;

/** A runner that takes every transaction and applies nothing: the backend's side only. */
class CountingRunner implements NftRunner {
  bytes = 0;
  async run(text: string): Promise<void> {
    this.bytes += text.length;
  }
  async check(): Promise<void> {}
  async list(): Promise<Buffer | undefined> {
    return undefined;
  }
}

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const gc = (globalThis as { gc?: () => void }).gc;
const heapMB = () => {
  gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
};
const quantile = (xs: number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))] ?? 0;

const rows: string[][] = [];
for (const n of SIZES) {
  const runner = new CountingRunner();
  const backend = new NftBackend({
    runner,
    tables: [BENCH_TABLE],
    log: silentLogger,
  });
  const log = new ServiceChangeLog();
  const editor = PersistentMap.empty<LocalService>().edit();
  for (let i = 0; i < n; i++) editor.set(`bench/svc-${i}`, svc(i, 0, ENDPOINTS));
  let services = editor.done();
  const before = heapMB();
  let t = cpuMs();
  await backend.sync({
    node: "bench",
    revision: 1,
    services,
    serviceCIDRs: { IPv4: [], IPv6: [] },
    changeLog: log,
  });
  const cold = cpuMs() - t;
  const kept = heapMB() - before;
  const coldBytes = runner.bytes;
  const changes: number[] = [];
  for (let k = 0; k < CHANGES; k++) {
    const i = (k * 7919) % n;
    const key = `bench/svc-${i}`;
    services = services.set(key, svc(i, k + 1, ENDPOINTS));
    log.record(k + 2, new Set([key]));
    t = performance.now();
    await backend.sync({
      node: "bench",
      revision: k + 2,
      services,
      serviceCIDRs: { IPv4: [], IPv6: [] },
      changeLog: log,
    });
    changes.push(performance.now() - t);
  }
  rows.push([
    `${n / 1000}k`,
    `${cold.toFixed(0)} ms`,
    `${(coldBytes / 2 ** 20).toFixed(1)} MiB`,
    `${kept.toFixed(0)} MB`,
    `${quantile(changes, 0.5).toFixed(2)} ms`,
    `${quantile(changes, 0.99).toFixed(2)} ms`,
  ]);
}
const header = ["services x10 eps", "cold start CPU", "nft text", "heap kept", "change p50", "change p99"];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
for (const r of [header, ...rows]) console.log(r.map((c, i) => c.padEnd(widths[i] ?? 0)).join("  "));
