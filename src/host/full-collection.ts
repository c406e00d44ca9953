// A full collection of V8's heap on request. kpng runs one when the sources' first lists are all
// in the store: everything parsed to get there is garbage, and the first state, computed next,
// then fills a compact heap instead of one still being marked (docs/performance.md, "A full
// collection after the first load"). V8 runs a collection on request only with --expose-gc;
// the flag, set at run time, exposes `gc` in contexts made after it, so kpng takes the function
// from a context of its own and no global changes for the code around it.

import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { Logger } from "../observability/log.ts";

let collect: (() => void) | null | undefined;

function collector(): (() => void) | null {
  if (collect !== undefined) return collect;
  try {
    setFlagsFromString("--expose-gc");
    const gc: unknown = runInNewContext("gc");
    collect = typeof gc === "function" ? (gc as () => void) : null;
  } catch {
    collect = null;
  }
  return collect;
}

/** Runs a full, synchronous collection; false when this V8 runs none on request. */
export function collectFullHeap(): boolean {
  const gc = collector();
  if (gc === null) return false;
  gc();
  return true;
}

/** collectFullHeap after the first load, with what it took and freed on a debug line. */
export function collectAfterFirstLoad(log: Logger): void {
  const before = process.memoryUsage().heapUsed;
  const start = performance.now();
  if (!collectFullHeap()) {
    log.debug("no full collection after the first load: this V8 runs none on request");
    return;
  }
  log.debug(
    {
      ms: Math.round(performance.now() - start),
      heapMiBBefore: Math.round(before / 2 ** 20),
      heapMiBAfter: Math.round(process.memoryUsage().heapUsed / 2 ** 20),
    },
    "collected the heap after the first load",
  );
}
