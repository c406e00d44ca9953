// Full states as encoded frames, shared by every stream that starts from the same state at the
// same revision: the first full state to many clients costs one encoding per distinct state, not
// one per client. Bounded by the bytes the held frames reference (a buffer shared by several
// states counts in each, so the bound errs on the safe side). A state pushed out of the bound
// while streams still write it stays shared through a weak reference until they are done.

import type { Frame } from "./frames.ts";

/** Bytes of full-state frames held by default: ~30 full states of 10k services × 10 endpoints. */
const DEFAULT_FULL_STATE_BYTES = 256 * 2 ** 20;

interface Held {
  readonly revision: number;
  readonly frames: Frame[];
  readonly bytes: number;
}

interface Shared {
  readonly revision: number;
  readonly frames: WeakRef<Frame[]>;
}

export class FullStateCache {
  readonly #maxBytes: number;
  #bytes = 0;
  /** In order of use: the first is the least recently used. */
  readonly #held = new Map<object, Held>();
  readonly #shared = new WeakMap<object, Shared>();

  constructor(maxBytes = DEFAULT_FULL_STATE_BYTES) {
    this.#maxBytes = maxBytes;
  }

  /** Bytes the held frames reference. */
  get bytes(): number {
    return this.#bytes;
  }

  /** The frames of `state` at `revision`: the cached ones, or what `build` returns (then cached). */
  frames(state: object, revision: number, build: () => Frame[]): Frame[] {
    const held = this.#held.get(state);
    if (held?.revision === revision) {
      this.#held.delete(state);
      this.#held.set(state, held);
      return held.frames;
    }
    const shared = this.#shared.get(state);
    let frames = shared?.revision === revision ? shared.frames.deref() : undefined;
    if (frames === undefined) {
      frames = build();
      this.#shared.set(state, { revision, frames: new WeakRef(frames) });
    }
    this.#hold(state, revision, frames);
    return frames;
  }

  /** Drops what is held for `state` (it has a new revision: the old frames serve no new stream). */
  forget(state: object): void {
    const held = this.#held.get(state);
    if (held === undefined) return;
    this.#held.delete(state);
    this.#bytes -= held.bytes;
  }

  #hold(state: object, revision: number, frames: Frame[]): void {
    this.forget(state);
    let bytes = 0;
    for (const frame of frames) bytes += frame.length;
    if (bytes > this.#maxBytes) return;
    this.#held.set(state, { revision, frames, bytes });
    this.#bytes += bytes;
    for (const [oldest] of this.#held) {
      if (this.#bytes <= this.#maxBytes) break;
      this.forget(oldest);
    }
  }
}
