// How long starting a command blocks kpng's event loop, by the size of kpng's heap. Node starts
// a command by forking, and the fork copies the page tables of the whole process, so the block
// grows with the resident memory (a proxy at 100k Services holds about 1.4 GiB). Two ways:
//   direct   child_process.spawn from this process, as execCommand does;
//   spawner  through SmallSpawner (src/host/small-spawner.ts), forked at start while this process
//            is small, which forks the command for it (the conntrack batches go this way).
// The heap is filled with small live objects, as kpng's state is. Block: the synchronous part of
// the call (the event loop can do nothing else meanwhile); the command is `true`.
//
//   node bench/spawn-block.ts [--heap-mib=0,1400] [--spawns=20] [--quick]

import { spawn } from "node:child_process";
import { SmallSpawner } from "../src/host/small-spawner.ts";
import { flagValue, quick, table } from "./lib/table.ts";

const HEAPS = (flagValue("heap-mib") ?? (quick ? "0,200" : "0,1400")).split(",").map(Number);
const SPAWNS = Number(flagValue("spawns") ?? (quick ? 5 : 20));

const spawner = new SmallSpawner();
const held: unknown[] = [];
/** Grows this process's live heap to about `mib` MiB of small objects. */
function fillTo(mib: number): void {
  while (process.memoryUsage().rss < mib * 1024 * 1024) {
    const chunk: { n: number; s: string }[] = [];
    for (let i = 0; i < 100_000; i++) chunk.push({ n: i, s: `endpoint-${i}` });
    held.push(chunk);
  }
}

const exited = (child: ReturnType<typeof spawn>) => new Promise((resolve) => child.on("close", resolve));
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? 0;

const rows: string[][] = [];
for (const mib of HEAPS) {
  fillTo(mib);
  const direct: number[] = [];
  const viaSpawner: number[] = [];
  for (let k = 0; k < SPAWNS; k++) {
    let t = performance.now();
    const child = spawn("true", [], { stdio: "ignore" });
    direct.push(performance.now() - t);
    await exited(child);
    t = performance.now();
    const done = spawner.exec(["true"], { timeoutMs: 10_000 });
    viaSpawner.push(performance.now() - t);
    await done;
  }
  const rss = Math.round(process.memoryUsage().rss / 1024 / 1024);
  for (const [way, xs] of [
    ["direct", direct],
    ["spawner", viaSpawner],
  ] as const)
    rows.push([
      String(rss),
      way,
      pct(xs, 0.5).toFixed(2),
      pct(xs, 0.99).toFixed(2),
      Math.max(...xs).toFixed(2),
    ]);
}
spawner.close();
console.log(`event loop blocked by one command start (${SPAWNS} starts each)`);
console.log(table(["RSS MiB", "way", "p50 ms", "p99 ms", "max ms"], rows));
