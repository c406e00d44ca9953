// The kube source's first list at scale: the test API server (a process of its own, so its CPU is
// not counted) holds N Services with an EndpointSlice of 10 endpoints each and 100 Nodes; the
// real KubeSource lists it in pages of 500 into a ClusterStore, as `kpng kube …` does, until the
// store is told it is synced. Printed: this process's CPU (user + system) and wall time to that
// point, its peak RSS, and the heap held once the lists are in. It runs as bin/kpng runs kpng
// (malloc on huge pages, bench/lib/as-kpng-runs.ts).
//
//   node --expose-gc bench/kube-list.ts [--sizes=10000,100000] [--page-size=500] [--quick]

import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { ClusterStore } from "../src/brain/store.ts";
import { PlainConnection } from "../src/kube/service-account.ts";
import { KubeConfigTransport } from "../src/kube/transport.ts";
import type { ClusterSink } from "../src/model/global.ts";
import { silentLogger } from "../src/observability/log.ts";
import { KubeSource } from "../src/sources/kube/source.ts";
import { runAsKpngRuns } from "./lib/as-kpng-runs.ts";
import { flagValue, sizesFlag, table } from "./lib/table.ts";

runAsKpngRuns();

const SIZES = sizesFlag([10_000, 100_000]);
const PAGE_SIZE = Number(flagValue("page-size") ?? 500);
const ENDPOINTS = 10;
const APISERVER = join(fileURLToPath(new URL(".", import.meta.url)), "lib/apiserver-main.ts");

async function startApiServer(services: number): Promise<{ port: number; stop: () => void }> {
  const child = spawn(process.execPath, [APISERVER, String(services), String(ENDPOINTS), "0", ""], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout });
  const port = await new Promise<number>((resolve, reject) => {
    lines.on("line", (line) => {
      if (line.startsWith("ready ")) resolve(Number(line.split(" ")[1]));
    });
    child.on("exit", (code) => reject(new Error(`the test API server exited (${code})`)));
  });
  return { port, stop: () => child.stdin.end() };
}

interface ListRun {
  readonly services: number;
  readonly cpuMs: number;
  /** Minor page faults in the list: first touches of memory (docs/performance.md). */
  readonly pageFaults: number;
  readonly wallMs: number;
  readonly heapMiB: number;
}

async function listOnce(services: number): Promise<ListRun> {
  const api = await startApiServer(services);
  try {
    global.gc?.();
    const store = new ClusterStore({ log: silentLogger });
    let markSynced!: () => void;
    const synced = new Promise<void>((resolve) => {
      markSynced = resolve;
    });
    // The store as the source's sink; its synced() ends the measured list.
    const sink: ClusterSink = {
      upsert: (object) => store.upsert(object),
      delete: (kind, key) => store.delete(kind, key),
      replace: (kind, objects) => store.replace(kind, objects),
      startList: (kind) => store.startList(kind),
      synced: () => {
        store.synced();
        markSynced();
      },
    };
    const source = new KubeSource({
      transport: new KubeConfigTransport(new PlainConnection(`http://127.0.0.1:${api.port}`)),
      log: silentLogger,
      timings: { pageSize: PAGE_SIZE },
    });
    const cpu = process.cpuUsage();
    const faults = process.resourceUsage().minorPageFault;
    const t0 = performance.now();
    await source.start(sink);
    await synced;
    const used = process.cpuUsage(cpu);
    const pageFaults = process.resourceUsage().minorPageFault - faults;
    const wallMs = performance.now() - t0;
    await source.stop();
    global.gc?.();
    const heapMiB = process.memoryUsage().heapUsed / 2 ** 20;
    // Read after the heap, so the store is alive (and counted) when it is measured.
    const stored = [...store.services()].length;
    if (stored !== services) throw new Error(`the store holds ${stored} Services, not ${services}`);
    return { services, cpuMs: (used.user + used.system) / 1000, pageFaults, wallMs, heapMiB };
  } finally {
    api.stop();
  }
}

const runs: ListRun[] = [];
for (const n of SIZES) runs.push(await listOnce(n));
console.log(
  `kube source first list (Services, EndpointSlices of ${ENDPOINTS}, Nodes; pages of ${PAGE_SIZE}) into a ClusterStore`,
);
console.log(
  table(
    ["services", "CPU s (user+sys)", "page faults", "wall s", "heap after MiB", "peak RSS MiB"],
    runs.map((r) => [
      String(r.services),
      (r.cpuMs / 1000).toFixed(2),
      String(r.pageFaults),
      (r.wallMs / 1000).toFixed(2),
      r.heapMiB.toFixed(0),
      (process.resourceUsage().maxRSS / 1024).toFixed(0),
    ]),
  ),
);
process.exit(0);
