// What a first touch of memory costs on this machine, against memory used again: the price of
// every page a process maps afresh (its heap growing, a large string or buffer made and dropped).
// On a virtual machine whose host backs guest memory only once it is touched, and takes back
// what the guest frees, this is several times the cost of the work that fills the memory, and it
// shows up as CPU of the process (docs/performance.md, "First touches of memory").
//
//   node --expose-gc bench/first-touch.ts [--quick] [--mib=185]
//
// - fresh: a buffer of --mib MiB allocated and filled, four times, each freed before the next
//   (malloc maps a buffer this large afresh, unless told to keep its heap on huge pages:
//   GLIBC_TUNABLES=glibc.malloc.hugetlb=1, as kpng runs, then it uses the first one's memory again);
// - reused: the same buffer filled again;
// - one byte per page: a fresh buffer of which one byte per 4 KiB page is written, twice: what
//   the first touch costs per page, whatever is written;
// - strings: --mib × 2 MiB of text made as strings of 512 KiB (above V8's large-object size of
//   128 KiB, below the size from which Node makes an external string: each mapped afresh) and of
//   64 KiB (made in the young generation, whose memory is used again), dropped as made;
// - after a process started: a buffer written again, one byte per page, and (with --expose-gc) a
//   full collection of a heap of small objects, each right after nothing and right after a
//   process was started (`true`). Starting a process forks this one, which leaves every page
//   copy-on-write: the next write to each takes a fault (src/host/small-spawner.ts).

import { spawnSync } from "node:child_process";
import { flagValue, table } from "./lib/table.ts";

const quick = process.argv.includes("--quick");
const MIB = Number(flagValue("mib") ?? (quick ? 32 : 185));

interface Cost {
  readonly cpuMs: number;
  readonly systemMs: number;
  readonly faults: number;
}

function measure(work: () => void): Cost {
  const before = process.resourceUsage();
  work();
  const after = process.resourceUsage();
  return {
    cpuMs: (after.userCPUTime + after.systemCPUTime - before.userCPUTime - before.systemCPUTime) / 1000,
    systemMs: (after.systemCPUTime - before.systemCPUTime) / 1000,
    faults: after.minorPageFault - before.minorPageFault,
  };
}

const bytes = MIB * 2 ** 20;
const rows: [string, Cost][] = [];
let kept = 0;
for (let round = 0; round < 4; round++) {
  let buffer: Buffer | undefined;
  rows.push([
    `fresh buffer, round ${round + 1}`,
    measure(() => {
      buffer = Buffer.allocUnsafeSlow(bytes);
      buffer.fill(round + 1);
    }),
  ]);
  if (round === 0 && buffer !== undefined) {
    const again = buffer;
    rows.push(["the same buffer filled again", measure(() => again.fill(9))]);
  }
  kept += buffer?.[round] ?? 0;
  // Freed now, not at the next full collection.
  (buffer?.buffer as ArrayBuffer | undefined)?.transfer(0);
}
for (let round = 0; round < 2; round++) {
  let buffer: Buffer | undefined;
  rows.push([
    `fresh buffer, one byte per 4 KiB page, round ${round + 1}`,
    measure(() => {
      buffer = Buffer.allocUnsafeSlow(bytes);
      for (let at = 0; at < bytes; at += 4096) buffer[at] = round + 1;
    }),
  ]);
  kept += buffer?.[0] ?? 0;
  (buffer?.buffer as ArrayBuffer | undefined)?.transfer(0);
}
for (const pieceKiB of [512, 64]) {
  const source = Buffer.alloc(pieceKiB * 1024, 0x61);
  rows.push([
    `${2 * MIB} MiB as strings of ${pieceKiB} KiB`,
    measure(() => {
      for (let made = 0; made < 2 * bytes; made += source.length) kept += source.toString("latin1").length;
    }),
  ]);
}

{
  const buffer = Buffer.allocUnsafeSlow(bytes);
  const writeAll = () => {
    for (let at = 0; at < bytes; at += 4096) buffer[at] = (buffer[at] ?? 0) + 1;
  };
  writeAll();
  for (const started of [false, true]) {
    if (started) spawnSync("true");
    rows.push([
      `the same buffer, one byte per 4 KiB page, ${started ? "after a process was started" : "again"}`,
      measure(writeAll),
    ]);
  }
  kept += buffer[0] ?? 0;
}
const gc = (globalThis as { gc?: () => void }).gc;
if (gc !== undefined) {
  // About --mib MiB of heap: 48 bytes an object, 8 a slot of the array.
  const objects = Array.from({ length: Math.round(bytes / 56) }, (_, i) => ({ i, next: null }));
  gc();
  for (const started of [false, true]) {
    if (started) spawnSync("true");
    rows.push([
      `a full collection of a heap of small objects, ${started ? "after a process was started" : "after nothing"}`,
      measure(gc),
    ]);
  }
  kept += objects.length;
}

console.log(`first touch of memory: ${MIB} MiB (${kept > 0 ? "done" : ""})`);
console.log(
  table(
    ["work", "CPU ms", "of it system ms", "page faults", "CPU ms per MiB"],
    rows.map(([work, c]) => {
      const mib = work.includes("strings") ? 2 * MIB : MIB;
      return [work, c.cpuMs.toFixed(0), c.systemMs.toFixed(0), String(c.faults), (c.cpuMs / mib).toFixed(2)];
    }),
  ),
);
