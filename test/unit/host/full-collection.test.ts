import assert from "node:assert/strict";
import { test } from "node:test";
import { setImmediate as nextMacrotask } from "node:timers/promises";
import { collectAfterFirstLoad, collectFullHeap } from "../../../src/host/full-collection.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";

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

test("collectAfterFirstLoad says on a debug line what the collection took and left", () => {
  const { log, lines } = capturingLogger("debug");
  collectAfterFirstLoad(log);
  const line = lines.find((l) => l.msg === "collected the heap after the first load");
  assert.ok(line, JSON.stringify(lines));
  assert.equal(typeof line.ms, "number");
  assert.equal(typeof line.heapMiBBefore, "number");
  assert.equal(typeof line.heapMiBAfter, "number");
});
