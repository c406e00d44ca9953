// BPF map batch updates on a thread of their own. At a large cold start the kernel's inserts and
// kpng's encoding of the entries each take a good part of the write (docs/performance.md): with
// the syscall on this thread, the next batch is encoded while the kernel inserts the one before. One
// update is in flight at a time, so the order of the batches (lists before the frontends that
// name them) is the order they were given in, and nothing starts after a failure.

import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/** Int32 fields of the status shared with the thread. */
const STATUS = { done: 0, result: 1, written: 2, length: 3 } as const;

/** One batch update, as the thread receives it. The buffers are shared memory. */
interface UpdateJob {
  readonly fd: number;
  readonly keys: SharedArrayBuffer;
  readonly keysOffset: number;
  readonly values: SharedArrayBuffer;
  readonly valuesOffset: number;
  readonly keyBytes: number;
  readonly valueBytes: number;
  readonly count: number;
  readonly status: SharedArrayBuffer;
}

/** How an update ended: `result` is the syscall's (0, or a negative errno), `written` its count. */
export interface UpdateOutcome {
  readonly result: number;
  readonly written: number;
  readonly count: number;
}

/** Starts the thread: kpng's (UPDATE_WORKER), or a test's stand-in. */
type ThreadStart = () => Worker;

/**
 * The thread's code: each job is one batch syscall, its outcome stored in the shared status.
 * JavaScript in a string, where a `.ts` file would have the thread load Node's TypeScript
 * stripper, a WebAssembly module whose compilation then takes both cores for a while, beside
 * kpng's first changes.
 */
const UPDATE_WORKER = `
const { parentPort } = require("node:worker_threads");
const { native } = require(${JSON.stringify(createRequire(import.meta.url).resolve("bpf/dist/util.js"))});
const NO_FLAGS = { elemFlags: 0 };
parentPort.on("message", (job) => {
  const [result, written] = native.mapUpdateBatch(
    job.fd,
    Buffer.from(job.keys, job.keysOffset, job.keyBytes),
    Buffer.from(job.values, job.valuesOffset, job.valueBytes),
    job.count,
    NO_FLAGS,
  );
  const status = new Int32Array(job.status);
  Atomics.store(status, ${STATUS.result}, Math.min(result, 0));
  Atomics.store(status, ${STATUS.written}, written);
  Atomics.add(status, ${STATUS.done}, 1);
  Atomics.notify(status, ${STATUS.done});
});
`;

const startUpdateWorker: ThreadStart = () => new Worker(UPDATE_WORKER, { eval: true });

/** The longest one batch may take before the thread is given up (a batch takes milliseconds). */
const DEFAULT_DEADLINE_MS = 10_000;

/** Thrown by settle() when the thread has not answered by the deadline. */
export class UpdateThreadTimeout extends Error {
  override readonly name = "UpdateThreadTimeout";
}

/** A shared-memory buffer for a batch the thread is to read. */
export function sharedBuffer(bytes: number): Buffer {
  return Buffer.from(new SharedArrayBuffer(bytes));
}

export class UpdateThread {
  readonly #start: ThreadStart;
  readonly #deadlineMs: number;
  #status = newStatus();
  #worker: Worker | undefined;
  /** Updates given to the thread so far; `done` in the status counts those it finished. */
  #submitted = 0;
  #inFlight: { readonly count: number } | undefined;

  constructor(options: { readonly start?: ThreadStart; readonly deadlineMs?: number } = {}) {
    this.#start = options.start ?? startUpdateWorker;
    this.#deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
  }

  /**
   * Starts `count` entries of `keys` and `values` (shared memory, packed as the syscall takes
   * them) into the map `fd` on the thread, after waiting for the update before (whose failure is
   * returned instead, and this one not started).
   */
  submit(
    fd: number,
    keys: Buffer,
    values: Buffer,
    keySize: number,
    valueSize: number,
    count: number,
  ): UpdateOutcome | undefined {
    const before = this.settle();
    if (before !== undefined && (before.result !== 0 || before.written !== before.count)) return before;
    if (!(keys.buffer instanceof SharedArrayBuffer) || !(values.buffer instanceof SharedArrayBuffer))
      throw new TypeError("a background map update needs buffers in shared memory");
    if (this.#worker === undefined) {
      this.#worker = this.#start();
      // The thread never keeps kpng alive, nor takes it down: a thread that fails stops answering,
      // which the deadline turns into a failed write.
      this.#worker.unref();
      this.#worker.on("error", () => {});
    }
    const job: UpdateJob = {
      fd,
      keys: keys.buffer,
      keysOffset: keys.byteOffset,
      values: values.buffer,
      valuesOffset: values.byteOffset,
      keyBytes: count * keySize,
      valueBytes: count * valueSize,
      count,
      status: this.#status.buffer as SharedArrayBuffer,
    };
    this.#worker.postMessage(job);
    this.#submitted++;
    this.#inFlight = { count };
    return undefined;
  }

  /**
   * Waits for the update in flight, if any, and says how it ended. Throws UpdateThreadTimeout
   * when the thread has not finished it by the deadline; the thread is then dropped, and the
   * next update starts another.
   */
  settle(): UpdateOutcome | undefined {
    const inFlight = this.#inFlight;
    if (inFlight === undefined) return undefined;
    this.#inFlight = undefined;
    const status = this.#status;
    const deadline = performance.now() + this.#deadlineMs;
    for (;;) {
      const done = Atomics.load(status, STATUS.done);
      if (done >= this.#submitted) break;
      const left = deadline - performance.now();
      if (left <= 0) {
        this.#drop();
        throw new UpdateThreadTimeout(`no answer from the map update thread within ${this.#deadlineMs} ms`);
      }
      Atomics.wait(status, STATUS.done, done, left);
    }
    return {
      result: Atomics.load(status, STATUS.result),
      written: Atomics.load(status, STATUS.written),
      count: inFlight.count,
    };
  }

  /** Stops the thread (after the update in flight); a later update starts another. */
  close(): void {
    try {
      this.settle();
    } catch {
      // Already given up; nothing more to wait for.
    }
    this.#drop();
  }

  #drop(): void {
    void this.#worker?.terminate();
    this.#worker = undefined;
    // A late answer from a dropped thread lands in a status no one reads any more.
    this.#status = newStatus();
    this.#submitted = 0;
  }
}

function newStatus(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(STATUS.length * 4));
}
