// How long the main thread waited for a core (/proc/self/task/<tid>/schedstat, the scheduler's
// run delay, in nanoseconds): a synchronous stretch of work (no sleep, syscalls included) took
// its wall time minus this on a core. Exact, unlike getrusage: the thread figure moves in whole
// ticks and the process figure includes GC and libuv threads. On a loaded machine most of a
// sub-millisecond change's wall time is this wait.

import { closeSync, openSync, readSync } from "node:fs";

export class RunDelay {
  readonly #fd = openSync(`/proc/self/task/${process.pid}/schedstat`, "r");
  readonly #buf = Buffer.alloc(128);

  /** The thread's total wait for a core so far, in ms (one pread). */
  ms(): number {
    const n = this.#buf.length;
    const read = readSync(this.#fd, this.#buf, 0, n, 0);
    return Number(this.#buf.toString("latin1", 0, read).split(" ")[1]) / 1e6;
  }

  close(): void {
    closeSync(this.#fd);
  }
}
