// The map update thread (update-thread.ts): runs each batch update it is given and reports how it
// ended in the shared status, which the main thread waits on.

import { parentPort } from "node:worker_threads";
import { native } from "bpf/dist/util.js";
import { STATUS, type UpdateJob } from "./update-thread.ts";

const NO_FLAGS = { elemFlags: 0 };

parentPort?.on("message", (job: UpdateJob) => {
  const [result, written] = native.mapUpdateBatch(
    job.fd,
    Buffer.from(job.keys, job.keysOffset, job.keyBytes),
    Buffer.from(job.values, job.valuesOffset, job.valueBytes),
    job.count,
    NO_FLAGS,
  ) as [number, number];
  const status = new Int32Array(job.status);
  Atomics.store(status, STATUS.result, Math.min(result, 0));
  Atomics.store(status, STATUS.written, written);
  Atomics.add(status, STATUS.done, 1);
  Atomics.notify(status, STATUS.done);
});
