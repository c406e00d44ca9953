// Frames are grouped into write batches in order, up to the batch size: large frames are written
// as they are, runs of small ones copied into one buffer, reused only after it was released.

import assert from "node:assert/strict";
import { test } from "node:test";
import { BATCH_BYTES, DIRECT_BYTES, takeBatch } from "../../../src/api/write-batches.ts";

const frame = (size: number, fill: number) => Buffer.alloc(size, fill);
const bytesOf = (batch: { pieces: readonly Buffer[] }) => Buffer.concat(batch.pieces);

test("batches hold the frames in order, never more than BATCH_BYTES, and every frame once", () => {
  const sizes = [100, 5000, 30_000, 20_000, 40_000, 1, 70_000, 10, 10, 64 * 1024 - 20, 300, 20, 700, 900];
  const frames = sizes.map((size, i) => frame(size, i + 1));
  const out: Buffer[] = [];
  for (let i = 0; i < frames.length; ) {
    const batch = takeBatch(frames, i);
    assert.ok(batch.count >= 1);
    const bytes = bytesOf(batch);
    assert.ok(bytes.length <= BATCH_BYTES || batch.count === 1, "only a single frame may exceed the size");
    out.push(bytes);
    i += batch.count;
    batch.release();
  }
  assert.deepEqual(Buffer.concat(out), Buffer.concat(frames));
  // 100+5000+30000+20000 fit together; 40000 does not fit with them.
  assert.equal(takeBatch(frames, 0).count, 4);
});

test("large frames are written as they are; small ones between them are copied together", () => {
  const big = [frame(DIRECT_BYTES, 1), frame(5000, 2), frame(3000, 5)];
  const frames = [big[0]!, frame(10, 7), frame(20, 8), big[1]!, frame(30, 9), big[2]!];
  const batch = takeBatch(frames, 0);
  assert.equal(batch.count, 6);
  assert.equal(batch.pieces.length, 5);
  assert.equal(batch.pieces[0], big[0], "not copied");
  assert.deepEqual(batch.pieces[1], Buffer.concat([frame(10, 7), frame(20, 8)]));
  assert.equal(batch.pieces[2], big[1], "not copied");
  assert.equal(batch.pieces[3], frames[4], "a lone small frame is not copied either");
  assert.equal(batch.pieces[4], big[2], "not copied");
});

test("a released buffer is reused; one not released is not", () => {
  const run = (fill: number) => Array.from({ length: 4 }, () => frame(DIRECT_BYTES - 1, fill));
  const a = takeBatch(run(1), 0);
  const b = takeBatch(run(2), 0);
  assert.equal(a.pieces.length, 1);
  assert.notEqual(a.pieces[0]!.buffer, b.pieces[0]!.buffer, "a is still being written");
  const kept = Buffer.from(a.pieces[0]!);
  b.release();
  const c = takeBatch(run(9), 0);
  assert.equal(c.pieces[0]!.buffer, b.pieces[0]!.buffer, "b's buffer is used again");
  assert.deepEqual(a.pieces[0], kept, "a's bytes were not touched");
  a.release();
  c.release();
});

test("a small run is a buffer of its own size, not a reused one", () => {
  const small = takeBatch([frame(100, 1), frame(60, 2)], 0);
  assert.equal(small.count, 2);
  assert.equal(small.pieces.length, 1);
  assert.equal(small.pieces[0]!.length, 160);
  assert.deepEqual(small.pieces[0], Buffer.concat([frame(100, 1), frame(60, 2)]));
  small.release();
});
