// A restart of to-nft on a node whose tables it already programmed: `kpng file --input <file>
// to-local to-nft` in a private network namespace runs to its first ruleset and stops (its rules
// stay), then starts again and adopts the tables (`nft -j list table`, then only the differences).
// Printed per size: the cold start's time to the rules, then the restart's: time from start to
// the adopted tables being in line ("nftables synced"), the transactions of that sync, the syncs
// that failed on the way (a failed listing, say) and whether the tables were deleted and rewritten
// (kpng's reset after repeated failures: Services unreachable until rewritten), kpng's CPU and
// peak RSS by then. N Services × 10 endpoints (bench/lib/cluster.ts). Needs root.
//
//   node bench/nft-restart.ts [--quick] [--sizes=10000,100000]

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Topology } from "../tools/netns/topology.ts";
import { kpngOnFile, writeClusterFile } from "./lib/cluster.ts";
import type { Line } from "./lib/line-process.ts";
import { sizesFlag, table } from "./lib/table.ts";

const quick = process.argv.includes("--quick");
const SIZES = sizesFlag(quick ? [1000] : [10_000, 100_000]);
const ENDPOINTS = 10;
/** A listing of a table at 100k Services takes minutes (docs/nft.md, "Restarts at scale"). */
const TIMEOUT_MS = 900_000;

if (process.getuid?.() !== 0) {
  console.log("nft-restart: skipped (needs root for network namespaces)");
  process.exit(0);
}

const msg = (name: string) => (text: string) => text.includes(`"msg":"${name}"`);
const seconds = (line: Line, from: number) => ((line.at - from) / 1000).toFixed(2);

const startKpng = (topo: Topology, file: string) =>
  kpngOnFile(topo.node.name, topo.nodeIPv4, file, ["to-nft"]);

async function run(topo: Topology, n: number, file: string): Promise<string[]> {
  await topo.node.exec(["nft", "flush", "ruleset"]);
  const cold = startKpng(topo, file);
  let coldSynced: Line;
  try {
    coldSynced = await cold.waitFor(msg("nftables synced"), 0, TIMEOUT_MS);
  } finally {
    await cold.stop();
  }
  const again = startKpng(topo, file);
  try {
    const synced = await again.waitFor(msg("nftables synced"), 0, TIMEOUT_MS);
    const writes = /"writes":(\d+)/.exec(synced.text)?.[1] ?? "?";
    const cpu = again.cpuTimes();
    return [
      String(n),
      seconds(coldSynced, cold.startedAt),
      seconds(synced, again.startedAt),
      writes,
      String(again.count(msg("nftables sync failed; will retry with a full resync of the family"))),
      again.count((t) => t.includes("sync keeps failing; deleting and rewriting")) > 0 ? "yes" : "no",
      (cpu.selfMs / 1000).toFixed(2),
      again.peakRssMiB().toFixed(0),
    ];
  } finally {
    await again.stop();
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
  `\nnft-restart: to-nft stopped and started again on its own tables (N Services × ${ENDPOINTS} endpoints); seconds from each start`,
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
