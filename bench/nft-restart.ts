// A restart of to-nft on a node whose tables it already programmed: `kpng file --input <file>
// to-local to-nft` in a private network namespace runs to its first ruleset and stops (its rules
// stay), then starts again and adopts the tables (the declarations and the dispatch maps listed,
// the endpoint maps written anew in the other generation, docs/nft.md "Restart").
// Printed per size: the cold start's time to the rules, then the restart's: time from start to
// the adopted tables being in line ("nftables synced"), the transactions of that sync, the syncs
// that failed on the way (a failed listing, say) and whether the tables were deleted and rewritten
// (kpng's reset after repeated failures: Services unreachable until rewritten), kpng's CPU and
// peak RSS by then. N Services × 10 endpoints (bench/lib/cluster.ts). Needs root.
// --then=ebpf starts to-ebpf the second time instead, as a node switching backends does: its nft
// companion adopts to-nft's tables ("ebpf-nftables synced"), beside a bpffs and cgroup v2 mount of
// its own.
//
//   node bench/nft-restart.ts [--quick] [--sizes=10000,100000] [--then=ebpf]

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { mountBpf } from "../tools/netns/bpf-mounts.ts";
import { Topology } from "../tools/netns/topology.ts";
import { kpngOnFile, writeClusterFile } from "./lib/cluster.ts";
import { type Line, LineProcess } from "./lib/line-process.ts";
import { sizesFlag, table } from "./lib/table.ts";

const quick = process.argv.includes("--quick");
const SIZES = sizesFlag(quick ? [1000] : [10_000, 100_000]);
const ENDPOINTS = 10;
/** A restart that lists the endpoint maps at 100k Services takes minutes (docs/nft.md, "Restarts at scale"). */
const TIMEOUT_MS = 900_000;

if (process.getuid?.() !== 0) {
  console.log("nft-restart: skipped (needs root for network namespaces)");
  process.exit(0);
}

const msg = (name: string) => (text: string) => text.includes(`"msg":"${name}"`);
const seconds = (line: Line, from: number) => ((line.at - from) / 1000).toFixed(2);

const switchToEbpf = process.argv.includes("--then=ebpf");
const CLI = fileURLToPath(new URL("../src/cli/main.ts", import.meta.url));

const startKpng = (topo: Topology, file: string, sink: readonly string[] = ["to-nft"]) =>
  kpngOnFile(topo.node.name, topo.nodeIPv4, file, sink);

/** The second start: to-nft again, or to-ebpf on mounts of its own, removed by `done`. */
async function restartOn(topo: Topology, file: string) {
  if (!switchToEbpf) return { kpng: startKpng(topo, file), synced: "nftables synced", done: async () => {} };
  const mounts = await mountBpf();
  const where = ["--bpf-root", mounts.bpfRoot, "--cgroup-root", mounts.clients];
  return {
    kpng: startKpng(topo, file, ["to-ebpf", ...where]),
    // The companion's sync loop logs under its own backend label.
    synced: "ebpf-nftables synced",
    done: async () => {
      const cleanup = new LineProcess("cleanup", topo.node.name, [
        process.execPath,
        CLI,
        "cleanup",
        "ebpf",
        ...where,
      ]);
      await cleanup.waitFor(() => false, 0, 60_000).catch(() => undefined);
      await mounts.destroy();
    },
  };
}

async function run(topo: Topology, n: number, file: string): Promise<string[]> {
  await topo.node.exec(["nft", "flush", "ruleset"]);
  const cold = startKpng(topo, file);
  let coldSynced: Line;
  try {
    coldSynced = await cold.waitFor(msg("nftables synced"), 0, TIMEOUT_MS);
  } finally {
    await cold.stop();
  }
  const restart = await restartOn(topo, file);
  const again = restart.kpng;
  try {
    const synced = await again.waitFor(msg(restart.synced), 0, TIMEOUT_MS);
    const writes = /"writes":(\d+)/.exec(synced.text)?.[1] ?? "?";
    const cpu = again.cpuTimes();
    return [
      String(n),
      seconds(coldSynced, cold.startedAt),
      seconds(synced, again.startedAt),
      writes,
      String(again.count((t) => t.includes("sync failed; will retry with a full resync of the family"))),
      again.count((t) => t.includes("sync keeps failing; deleting and rewriting")) > 0 ? "yes" : "no",
      (cpu.selfMs / 1000).toFixed(2),
      again.peakRssMiB().toFixed(0),
    ];
  } finally {
    await again.stop();
    await restart.done();
    await topo.node.exec(["nft", "flush", "ruleset"]);
  }
}

const work = mkdtempSync(join(tmpdir(), "kpng-nft-restart-"));
const topo = await Topology.create();
const rows: string[][] = [];
try {
  for (const n of SIZES) {
    const file = writeClusterFile({ services: n, endpointsPerService: ENDPOINTS }, work);
    rows.push(await run(topo, n, file));
    rmSync(file);
  }
} finally {
  await topo.destroy();
  rmSync(work, { recursive: true, force: true });
}
console.log(
  `\nnft-restart: to-nft stopped and ${switchToEbpf ? "to-ebpf started" : "started again"} on its tables (N Services × ${ENDPOINTS} endpoints); seconds from each start`,
);
console.log(
  table(
    [
      "services",
      "cold start: rules in s",
      "restart: tables in line s",
      "its transactions",
      "failed syncs",
      "tables deleted",
      "kpng CPU s",
      "peak RSS MiB",
    ],
    rows,
  ),
);
