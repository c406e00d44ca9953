// Long synchronous work (a cluster file of 100k Services parses for seconds) that gives the event
// loop a turn now and then, so that what runs beside it goes on: a backend's loader waiting on
// bpftool's answers, the health endpoints, timers.

/**
 * The longest stretch of work between two turns of the event loop: a signal or a probe waits
 * about this long at most. Each turn lets V8 run the collector's tasks it has queued, and what
 * waits beside the read run as well; much shorter slices raised the peak RSS of a 100k-Service
 * cold start (docs/performance.md, "A file read that gives the event loop turns").
 */
const DEFAULT_SLICE_MS = 1000;

export class EventLoopTurns {
  readonly #sliceMs: number;
  readonly #now: () => number;
  #sliceStart: number;

  constructor(sliceMs = DEFAULT_SLICE_MS, now: () => number = () => performance.now()) {
    this.#sliceMs = sliceMs;
    this.#now = now;
    this.#sliceStart = now();
  }

  /**
   * A promise to await when the slice is used up (it resolves after the event loop has handled
   * the I/O waiting by then), else undefined: checking costs a clock read, no await.
   */
  due(): Promise<void> | undefined {
    if (this.#now() - this.#sliceStart < this.#sliceMs) return undefined;
    return new Promise((resolve) =>
      setImmediate(() => {
        this.#sliceStart = this.#now();
        resolve();
      }),
    );
  }
}
