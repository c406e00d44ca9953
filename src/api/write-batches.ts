// The buffers frames are copied into for an HTTP/2 write, used again once HTTP/2 has written
// them: a full state to 1,000 nodes is ~100k batches, and a fresh buffer for each cost
// more CPU (allocation, page faults, garbage collection of external memory) than the copies.

import type { Frame } from "./frames.ts";

/** Bytes per batch: frames are gathered until the next would not fit. */
export const BATCH_BYTES = 64 * 1024;

/** Batches up to this size are allocated as they are, not taken from the reused buffers. */
const SMALL_BYTES = 2048;

/** Idle buffers kept for reuse; more are allocated when needed and left to the collector. */
const KEPT = 1024;
const idle: Buffer[] = [];

interface Batch {
  readonly bytes: Buffer;
  /** Frames taken from the list. */
  readonly count: number;
  /** Call once HTTP/2 has written `bytes` (never before): the buffer is then reused. */
  readonly release: () => void;
}

const NOTHING_TO_RELEASE = () => {};

/** The frames from `from` on that fit in one batch (at least one), in one buffer. */
export function takeBatch(frames: readonly Frame[], from: number): Batch {
  const first = frames[from]!;
  if (first.length * 2 > BATCH_BYTES || from + 1 === frames.length)
    return { bytes: first, count: 1, release: NOTHING_TO_RELEASE };
  let end = from;
  let size = 0;
  while (end < frames.length && size + frames[end]!.length <= BATCH_BYTES) size += frames[end++]!.length;
  // A small change set (a few hundred bytes to each of 1,000 streams) takes a slice of Node's
  // shared pool rather than holding a whole batch buffer while it is written.
  const small = size <= SMALL_BYTES;
  const buffer = small ? Buffer.allocUnsafe(size) : (idle.pop() ?? Buffer.allocUnsafeSlow(BATCH_BYTES));
  let at = 0;
  for (let i = from; i < end; i++) {
    buffer.set(frames[i]!, at);
    at += frames[i]!.length;
  }
  if (small) return { bytes: buffer, count: end - from, release: NOTHING_TO_RELEASE };
  let released = false;
  return {
    bytes: buffer.subarray(0, at),
    count: end - from,
    release: () => {
      if (released) return;
      released = true;
      if (idle.length < KEPT) idle.push(buffer);
    },
  };
}
