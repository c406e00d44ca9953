import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";
import { setImmediate as nextMacrotask } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import {
  collectAfterFirstLoad,
  collectAfterFirstSync,
  collectFullHeap,
} from "../../../src/host/full-collection.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";

const FULL_COLLECTION = fileURLToPath(new URL("../../../src/host/full-collection.ts", import.meta.url));
const SILENT_LOG = fileURLToPath(new URL("../../../src/observability/log.ts", import.meta.url));

// The test process runs without --expose-gc, as kpng does: the collection must still run.
test("collectFullHeap collects what nothing references, in a process started without --expose-gc", async () => {
  assert.equal(typeof (globalThis as { gc?: unknown }).gc, "undefined", "no global gc to lean on");
  let garbage: object | undefined = { big: new Array(1000).fill("x") };
  const ref = new WeakRef(garbage);
  garbage = undefined;
  // A WeakRef's target is kept until the job that read it ends.
  await nextMacrotask();
  assert.equal(collectFullHeap(), true);
  await nextMacrotask();
  assert.equal(ref.deref(), undefined);
  assert.equal(typeof (globalThis as { gc?: unknown }).gc, "undefined", "still no global gc");
});

for (const [collect, after] of [
  [collectAfterFirstLoad, "the first load"],
  [collectAfterFirstSync, "the first sync"],
] as const) {
  test(`${collect.name} says on a debug line what the collection took and left`, () => {
    const { log, lines } = capturingLogger("debug");
    collect(log);
    const line = lines.find((l) => l.msg === `collected the heap after ${after}`);
    assert.ok(line, JSON.stringify(lines));
    assert.equal(typeof line.ms, "number");
    assert.equal(typeof line.heapMiBBefore, "number");
    assert.equal(typeof line.heapMiBAfter, "number");
  });
}

/**
 * A process that loads (live objects, then the first load's collection), syncs (garbage that
 * lives long enough to be promoted), then idles with a trickle of allocation; --trace-gc output
 * from the start of the idle on.
 */
function idleAfterSync(collectAfterSync: boolean): string {
  const script = `
    const { collectAfterFirstLoad, collectAfterFirstSync } = await import(${JSON.stringify(FULL_COLLECTION)});
    const { silentLogger } = await import(${JSON.stringify(SILENT_LOG)});
    const live = [];
    for (let i = 0; i < 1_000_000; i++) live.push({ a: i, b: "x" + i, c: [i] });
    collectAfterFirstLoad(silentLogger);
    let render = [];
    for (let i = 0; i < 3_000_000; i++) render.push({ a: i, b: "r" + i });
    render = undefined;
    if (${collectAfterSync}) collectAfterFirstSync(silentLogger);
    console.log("idle from here");
    let keep;
    const trickle = setInterval(() => { keep = Array.from({ length: 500 }, (_, j) => ({ j })); }, 10);
    setTimeout(() => { clearInterval(trickle); console.log("idle", live.length, keep.length); }, 2500);
  `;
  // A small young generation, so that the trickle fills it every few hundred milliseconds.
  const out = execFileSync(
    process.execPath,
    ["--max-semi-space-size=1", "--trace-gc", "--input-type=module", "-e", script],
    { encoding: "utf8", maxBuffer: 64 * 2 ** 20 },
  );
  const from = out.indexOf("idle from here");
  assert.ok(from >= 0 && out.includes("idle 1000000 500"), out.slice(-500));
  return out.slice(from);
}

test("once kpng idles after its first sync, V8 marks the whole heap, unless it was collected after that sync", () => {
  const idle = idleAfterSync(false);
  assert.match(idle, /Scavenge/, "young collections in the idle");
  // The young collections of an idle process lower the limit to a few times what survived the
  // first load's collection, far below the heap the sync left.
  assert.match(idle, /Mark-Compact/, idle.slice(0, 2000));
  const collected = idleAfterSync(true);
  assert.match(collected, /Scavenge/, "young collections in the idle");
  assert.doesNotMatch(collected, /Mark-Compact/, collected.slice(0, 2000));
});

test("after the first load's collection the heap grows to six times what survived before it is marked again (V8 alone marks it sooner)", () => {
  // In a process of its own, whose collections --trace-gc lists: a mark-compact between the two
  // markers is the heap marked again before it grew that far.
  const script = `
    const { collectAfterFirstLoad } = await import(${JSON.stringify(FULL_COLLECTION)});
    const { silentLogger } = await import(${JSON.stringify(SILENT_LOG)});
    const live = [];
    for (let i = 0; i < 1_000_000; i++) live.push({ a: i, b: "x" + i, c: [i] });
    collectAfterFirstLoad(silentLogger);
    const survived = process.memoryUsage().heapUsed;
    console.log("collected after the first load");
    const more = [];
    while (process.memoryUsage().heapUsed < survived * 6)
      for (let j = 0; j < 10_000; j++) more.push({ a: j, b: "y" + j });
    console.log("grown", live.length + more.length);
  `;
  const out = execFileSync(
    process.execPath,
    ["--no-memory-reducer", "--trace-gc", "--input-type=module", "-e", script],
    { encoding: "utf8", maxBuffer: 64 * 2 ** 20 },
  );
  const from = out.indexOf("collected after the first load");
  const to = out.indexOf("grown ");
  assert.ok(from >= 0 && to > from, out.slice(-500));
  assert.doesNotMatch(out.slice(from, to), /Mark-Compact/, out.slice(from, to).slice(0, 2000));
});
