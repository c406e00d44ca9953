// Frames grouped for one HTTP/2 write each. A frame of DIRECT_BYTES or more (a full state's
// segments, shared between nodes) is handed to HTTP/2 as it is: copying every node's full state
// into write buffers cost more than HTTP/2's queue entry per frame. Runs of smaller frames (a
// full state of a node whose segments are its own, a change set) are copied into one buffer,
// used again once HTTP/2 has written it: a fresh buffer for each run cost more than the copies.

import type { Frame } from "./frames.ts";

/** Bytes per batch: frames are gathered until the next would not fit. */
export const BATCH_BYTES = 64 * 1024;

/** Frames this large are written as they are, not copied. */
export const DIRECT_BYTES = 1024;

/** Runs up to this size are allocated as they are, not taken from the reused buffers. */
const SMALL_BYTES = 2048;

/** Idle buffers kept for reuse; more are allocated when needed and left to the collector. */
const KEPT = 1024;
const idle: Buffer[] = [];

interface Batch {
  /** What to write, in order: large frames themselves, runs of small frames in one buffer each. */
  readonly pieces: readonly Buffer[];
  /** Frames taken from the list. */
  readonly count: number;
  /** Call once HTTP/2 has written every piece (never before): reused buffers are then reused. */
  readonly release: () => void;
}

const NOTHING_TO_RELEASE = () => {};

/** The frames from `from` on that fit in one batch (at least one). */
export function takeBatch(frames: readonly Frame[], from: number): Batch {
  let end = from + 1;
  let size = frames[from]!.length;
  while (end < frames.length && size + frames[end]!.length <= BATCH_BYTES) size += frames[end++]!.length;
  const pieces: Buffer[] = [];
  const reused: Buffer[] = [];
  for (let i = from; i < end; ) {
    const frame = frames[i]!;
    if (frame.length >= DIRECT_BYTES) {
      pieces.push(frame);
      i++;
      continue;
    }
    let runEnd = i + 1;
    let runSize = frame.length;
    while (runEnd < end && frames[runEnd]!.length < DIRECT_BYTES) runSize += frames[runEnd++]!.length;
    if (runEnd === i + 1) {
      pieces.push(frame);
      i++;
      continue;
    }
    // A small change set (a few hundred bytes to each of 1,000 streams) takes a slice of Node's
    // shared pool rather than holding a whole batch buffer while it is written.
    const small = runSize <= SMALL_BYTES;
    const buffer = small ? Buffer.allocUnsafe(runSize) : (idle.pop() ?? Buffer.allocUnsafeSlow(BATCH_BYTES));
    if (!small) reused.push(buffer);
    let at = 0;
    for (; i < runEnd; i++) {
      buffer.set(frames[i]!, at);
      at += frames[i]!.length;
    }
    pieces.push(small ? buffer : buffer.subarray(0, at));
  }
  if (reused.length === 0) return { pieces, count: end - from, release: NOTHING_TO_RELEASE };
  let released = false;
  return {
    pieces,
    count: end - from,
    release: () => {
      if (released) return;
      released = true;
      for (const buffer of reused) if (idle.length < KEPT) idle.push(buffer);
    },
  };
}
