// The map update thread, with threads that stand in for the kernel: each update is answered in the
// order given, one at a time; a failure is reported and nothing after it starts; a thread that
// never answers is given up at the deadline, and the next update gets a new thread.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Worker } from "node:worker_threads";
import { sharedBuffer, UpdateThread } from "../../../../src/backends/ebpf/update-thread.ts";

/**
 * A thread that takes each job as the real one does and answers with `answer(count, firstKeyByte)`
 * after `delayMs`, logging the first key byte of each job it ran into `log` (a count, then bytes).
 */
function fakeThread(log: Int32Array, answer: string, delayMs = 0): () => Worker {
  return () =>
    new Worker(
      `
      const { parentPort, workerData } = require("node:worker_threads");
      const log = new Int32Array(workerData.log);
      const answer = ${answer};
      parentPort.on("message", (job) => {
        const first = new Uint8Array(job.keys, job.keysOffset, 1)[0];
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${delayMs});
        const n = Atomics.add(log, 0, 1);
        Atomics.store(log, n + 1, first);
        const [result, written] = answer(job.count, first);
        const status = new Int32Array(job.status);
        Atomics.store(status, 1, result);
        Atomics.store(status, 2, written);
        Atomics.add(status, 0, 1);
        Atomics.notify(status, 0);
      });`,
      { eval: true, workerData: { log: log.buffer } },
    );
}

const newLog = () => new Int32Array(new SharedArrayBuffer(64 * 4));
const ran = (log: Int32Array) => [...log.subarray(1, 1 + Atomics.load(log, 0))];

function batch(first: number): [Buffer, Buffer] {
  const keys = sharedBuffer(16);
  keys[0] = first;
  return [keys, sharedBuffer(40)];
}

describe("eBPF map update thread", () => {
  test("updates run in the order given, one at a time, each answered to the call after it", () => {
    const log = newLog();
    const thread = new UpdateThread({ start: fakeThread(log, "(count) => [0, count]", 20) });
    for (const first of [1, 2, 3]) {
      const [keys, values] = batch(first);
      // Each submit first waits for the one before: never two in flight.
      assert.equal(thread.submit(3, keys, values, 8, 20, 2), undefined);
      assert.deepEqual(ran(log), [1, 2, 3].slice(0, first - 1));
    }
    assert.deepEqual(thread.settle(), { result: 0, written: 2, count: 2 });
    assert.deepEqual(ran(log), [1, 2, 3]);
    assert.equal(thread.settle(), undefined, "nothing left in flight");
    thread.close();
  });

  test("a failed update is reported by the next call, and the update given with that call does not start", () => {
    const log = newLog();
    // E2BIG (7) on the batch whose first key byte is 2, after one of its two entries.
    const thread = new UpdateThread({
      start: fakeThread(log, "(count, first) => (first === 2 ? [-7, 1] : [0, count])"),
    });
    const [k1, v1] = batch(1);
    const [k2, v2] = batch(2);
    const [k3, v3] = batch(3);
    assert.equal(thread.submit(3, k1, v1, 8, 20, 2), undefined);
    assert.equal(thread.submit(3, k2, v2, 8, 20, 2), undefined);
    assert.deepEqual(thread.submit(3, k3, v3, 8, 20, 2), { result: -7, written: 1, count: 2 });
    assert.equal(thread.settle(), undefined);
    assert.deepEqual(ran(log), [1, 2], "the batch after the failure never reached the thread");
    thread.close();
  });

  test("a thread that never answers is given up at the deadline; the next update starts a new thread", () => {
    const log = newLog();
    let started = 0;
    const hanging = fakeThread(log, "(count) => [0, count]", 60_000);
    const answering = fakeThread(log, "(count) => [0, count]");
    const thread = new UpdateThread({
      start: () => (++started === 1 ? hanging() : answering()),
      deadlineMs: 300,
    });
    const [keys, values] = batch(1);
    thread.submit(3, keys, values, 8, 20, 2);
    const t0 = performance.now();
    assert.throws(() => thread.settle(), /no answer from the map update thread within 300 ms/);
    const waited = performance.now() - t0;
    assert.ok(waited >= 290 && waited < 5000, `waited ${waited} ms`);
    const [k2, v2] = batch(2);
    assert.equal(thread.submit(3, k2, v2, 8, 20, 2), undefined);
    assert.deepEqual(thread.settle(), { result: 0, written: 2, count: 2 });
    assert.equal(started, 2);
    thread.close();
  });

  test("buffers outside shared memory are refused: the thread could not read them", () => {
    const thread = new UpdateThread({ start: fakeThread(newLog(), "(count) => [0, count]") });
    assert.throws(() => thread.submit(3, Buffer.alloc(16), Buffer.alloc(40), 8, 20, 2), /shared memory/);
    thread.close();
  });
});
