// Frames are packed into write batches in order, up to the batch size, and a batch's buffer is
// reused only after it was released.

import assert from "node:assert/strict";
import { test } from "node:test";
import { BATCH_BYTES, takeBatch } from "../../../src/api/write-batches.ts";

const frame = (size: number, fill: number) => Buffer.alloc(size, fill);

test("batches hold the frames in order, never more than BATCH_BYTES, and every frame once", () => {
  const sizes = [100, 5000, 30_000, 20_000, 40_000, 1, 70_000, 10, 10, 64 * 1024 - 20, 300];
  const frames = sizes.map((size, i) => frame(size, i + 1));
  const out: Buffer[] = [];
  for (let i = 0; i < frames.length; ) {
    const batch = takeBatch(frames, i);
    assert.ok(batch.count >= 1);
    assert.ok(
      batch.bytes.length <= BATCH_BYTES || batch.count === 1,
      "only a single frame may exceed the size",
    );
    out.push(Buffer.from(batch.bytes));
    i += batch.count;
    batch.release();
  }
  assert.deepEqual(Buffer.concat(out), Buffer.concat(frames));
  // 100+5000+30000+20000 fit together; 40000 does not fit with them.
  assert.equal(takeBatch(frames, 0).count, 4);
});

test("a released buffer is reused; one not released is not", () => {
  const frames = [frame(3000, 1), frame(3000, 2)];
  const a = takeBatch(frames, 0);
  const b = takeBatch(frames, 0);
  assert.notEqual(a.bytes.buffer, b.bytes.buffer, "a is still being written");
  const kept = Buffer.from(a.bytes);
  b.release();
  const c = takeBatch([frame(3000, 9), frame(3000, 9)], 0);
  assert.equal(c.bytes.buffer, b.bytes.buffer, "b's buffer is used again");
  assert.deepEqual(a.bytes, kept, "a's bytes were not touched");
  a.release();
  c.release();
});

test("a small batch is a buffer of its own size, not a reused one", () => {
  const small = takeBatch([frame(100, 1), frame(60, 2)], 0);
  assert.equal(small.count, 2);
  assert.equal(small.bytes.length, 160);
  assert.deepEqual(small.bytes, Buffer.concat([frame(100, 1), frame(60, 2)]));
  small.release();
});
