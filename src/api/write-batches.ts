// The buffers frames are copied into for an HTTP/2 write, used again once HTTP/2 has written
// them: a full state to 1,000 nodes is ~100k batches, and a fresh buffer for each cost
// more CPU (allocation, page faults, garbage collection of external memory) than the copies.

import type { Frame } from "./frames.ts";

/** Bytes per batch: frames are gathered until the next would not fit. */
export const BATCH_BYTES = 64 * 1024;

/** Idle buffers kept for reuse; more are allocated when needed and left to the collector. */
const KEPT = 1024;
const idle: Buffer[] = [];

export interface Batch {
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
  const buffer = idle.pop() ?? Buffer.allocUnsafeSlow(BATCH_BYTES);
  let at = 0;
  let i = from;
  while (i < frames.length && at + frames[i]!.length <= BATCH_BYTES) {
    buffer.set(frames[i]!, at);
    at += frames[i++]!.length;
  }
  let released = false;
  return {
    bytes: buffer.subarray(0, at),
    count: i - from,
    release: () => {
      if (released) return;
      released = true;
      if (idle.length < KEPT) idle.push(buffer);
    },
  };
}
