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

/**
 * How far the heap may grow past what the collection after the first load leaves, in per cent,
 * before V8 marks it all again. V8 chooses a few times what survived; the first state and the
 * first render at a large cluster then take the heap just past that, and a marking of the whole
 * heap, on threads beside kpng's, lands inside the first render in some cold starts and not in
 * others (docs/performance.md, "Room after the first load"). This collection alone sets a wider
 * limit; every later one sets its own as V8 chooses.
 */
const FIRST_LOAD_GROWTH_PERCENT = 500;

/** collectFullHeap after the first load, with what it took and freed on a debug line. */
export function collectAfterFirstLoad(log: Logger): void {
  try {
    setFlagsFromString(`--heap-growing-percent=${FIRST_LOAD_GROWTH_PERCENT}`);
    collectLogged(log, "the first load");
  } finally {
    // 0: V8's own choice again.
    setFlagsFromString("--heap-growing-percent=0");
  }
}

/**
 * collectFullHeap once the backend's first sync is in. What the first state and the first render
 * made for the sync is garbage then, and the heap holds several times what survived the first
 * load's collection. V8 marks it all at some point anyway: once kpng allocates little, a young
 * collection lowers the limit to a few times what survived the last full collection, far below
 * the heap. Collected here, that marking comes right after the first sync instead of at any time
 * in the minutes after it, and the limit after it follows what the sync left
 * (docs/performance.md, "A full collection after the first sync").
 */
export function collectAfterFirstSync(log: Logger): void {
  collectLogged(log, "the first sync");
}

function collectLogged(log: Logger, after: string): void {
  const before = process.memoryUsage().heapUsed;
  const start = performance.now();
  if (!collectFullHeap()) {
    log.debug(`no full collection after ${after}: this V8 runs none on request`);
    return;
  }
  log.debug(
    {
      ms: Math.round(performance.now() - start),
      heapMiBBefore: Math.round(before / 2 ** 20),
      heapMiBAfter: Math.round(process.memoryUsage().heapUsed / 2 ** 20),
    },
    `collected the heap after ${after}`,
  );
}
