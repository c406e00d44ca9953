// The core's first state: a cluster file (bench/lib/cluster.ts: N Services × 10 endpoints over
// 100 Nodes, one JSON `kind: List`) → the store → one node's local state → its JSON document.
//
// Two measurements per size, each in a fresh process:
// - phases, in-process: the file source reading the file into the store (as `kpng file` does:
//   read, parsed and validated a window at a time, its digest taken), the tracker's first state
//   (after the full collection kpng runs once the first load is in), writing the document (to
//   nowhere): CPU (user + system) of each, the heap after, and
//   the peak RSS once the local state is built (the file → local state target);
// - the CLI as a user runs it, `kpng file --input <file> to-local to-json --node-name n1 --once`
//   with its output to /dev/null: its CPU (from the parent's children times) and peak RSS (its
//   VmHWM, read from /proc until it exits).
//
//   node --expose-gc bench/first-state.ts [--sizes=10000,100000] [--quick] [--cpu-prof]
//        [--cloud-node-names]
//
// --cpu-prof profiles the CLI run and prints where its time went (bench/lib/cpu-profile.ts).
// --cloud-node-names names the nodes as clouds do ("ip-10-0-0-7.eu-west-1.compute.internal"),
// names that every endpoint on a node repeats.

import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { computeLocalService } from "../src/brain/local-service.ts";
import { LocalStateTracker } from "../src/brain/local-state-tracker.ts";
import { ClusterStore } from "../src/brain/store.ts";
import { collectFullHeap } from "../src/host/full-collection.ts";
import type { Service } from "../src/model/kube.ts";
import { silentLogger } from "../src/observability/log.ts";
import { localStateText } from "../src/sinks/json/local-state-text.ts";
import { FileSource } from "../src/sources/file/source.ts";
import { writeClusterFile } from "./lib/cluster.ts";
import { summarizeProfile } from "./lib/cpu-profile.ts";
import { measured } from "./lib/measured.ts";
import { sizesFlag, table } from "./lib/table.ts";

const NODE_NAME = "n1";

const cpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

const heapMiB = (): number => {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
};

/** The child: each phase's CPU ms and the heap after it, as one JSON line. */
async function phases(file: string): Promise<void> {
  const out: Record<string, number> = {};
  let t = cpuMs();
  const lap = (name: string) => {
    const now = cpuMs();
    out[name] = now - t;
    t = now;
  };
  // Read by the file source itself, as `kpng file` reads it: a JSON List this large a window at
  // a time, parsed and validated as it goes, its digest taken, every object handed to the store.
  // As kpng makes its store: a full collection before the first state (host/full-collection.ts).
  const store = new ClusterStore({ afterFirstLoad: collectFullHeap });
  await new FileSource({ path: file, watch: false, log: silentLogger }).start(store);
  lap("read");
  // As kpng's backends in the process compute it: for their node alone.
  const tracker = new LocalStateTracker(store, NODE_NAME, { alone: true });
  store.subscribe((change) => tracker.update(change));
  store.flush();
  lap("state");
  out.statePeakRssMiB = process.resourceUsage().maxRSS / 1024;
  let bytes = 0;
  for (const piece of localStateText(tracker.state)) bytes += piece.length;
  lap("text");
  out.heapMiB = heapMiB();
  out.services = tracker.state.services.size;
  out.textMiB = bytes / 2 ** 20;
  out.peakRssMiB = process.resourceUsage().maxRSS / 1024;
  // Every Service's local state once more, for another node, twice: first in memory the process
  // maps afresh, then, that state collected, in the memory it leaves (what first touches cost).
  const again = () => {
    const states = [];
    for (const key of store.serviceKeys())
      states.push(computeLocalService(store.service(key) as Service, store.slicesOf(key), OTHER_NODE));
    return states;
  };
  heapMiB();
  t = cpuMs();
  let states: unknown[] = again();
  lap("againFresh");
  states = [];
  heapMiB();
  t = cpuMs();
  states = again();
  lap("againReused");
  out.statesAgain = states.length;
  console.log(JSON.stringify(out));
}

const OTHER_NODE = { name: "node-2", labels: {} };

async function main(): Promise<void> {
  const here = fileURLToPath(new URL(".", import.meta.url));
  const cli = join(here, "..", "src", "cli", "main.ts");
  const profile = process.argv.includes("--cpu-prof");
  const cloudNodeNames = process.argv.includes("--cloud-node-names");
  const sizes = sizesFlag([10_000, 100_000]);
  const work = mkdtempSync(join(tmpdir(), "kpng-first-state-"));
  const rows: string[][] = [];
  try {
    for (const services of sizes) {
      const file = writeClusterFile({ services, endpointsPerService: 10, cloudNodeNames }, work);
      const inner = await measured(["--expose-gc", fileURLToPath(import.meta.url), "--phases", file]);
      const p = JSON.parse(inner.stdout) as Record<string, number>;
      const profDir = join(work, `prof-${services}`);
      const cliArgs = [
        ...(profile ? ["--cpu-prof", `--cpu-prof-dir=${profDir}`] : []),
        cli,
        "file",
        "--input",
        file,
        "--no-watch",
        "to-local",
        "to-json",
        "--node-name",
        NODE_NAME,
        "--once",
      ];
      const run = await measured(cliArgs);
      rows.push([
        String(services),
        String(p.services),
        (p.read ?? 0).toFixed(0),
        (p.state ?? 0).toFixed(0),
        (p.text ?? 0).toFixed(0),
        (p.heapMiB ?? 0).toFixed(0),
        (p.statePeakRssMiB ?? 0).toFixed(0),
        `${(p.againFresh ?? 0).toFixed(0)} / ${(p.againReused ?? 0).toFixed(0)}`,
        run.cpuMs.toFixed(0),
        run.peakRssMiB.toFixed(0),
      ]);
      rmSync(file);
      if (profile) {
        const name = readdirSync(profDir).find((f) => f.endsWith(".cpuprofile"));
        if (name !== undefined) {
          const s = summarizeProfile(join(profDir, name), 25);
          console.log(`\n${services} Services, CLI profile (${s.totalMs.toFixed(0)} ms sampled):`);
          for (const [layer, ms] of s.byLayer) console.log(`  ${ms.toFixed(0).padStart(7)} ms  ${layer}`);
          for (const [fn, , ms] of s.topFunctions) console.log(`  ${ms.toFixed(0).padStart(7)} ms  ${fn}`);
        }
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  console.log(
    "\nfirst state: file → store → local state → JSON document; CPU in ms (user + system)\n" +
      "(target at 100k: file → local state ≤ 3 s CPU and peak RSS ≤ 1 GiB; with the dump ≤ 5 s and ≤ 1.2 GiB)\n",
  );
  console.log(
    table(
      [
        "services",
        "in state",
        "file → store ms",
        "state ms",
        "text ms",
        "heap MiB",
        "state peak RSS MiB",
        "states again: fresh / reused memory ms",
        "CLI cpu ms",
        "CLI peak RSS MiB",
      ],
      rows,
    ),
  );
}

if (process.argv[2] === "--phases") await phases(process.argv[3] ?? "");
else await main();
