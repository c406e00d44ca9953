// Letting queued work finish without waiting on a clock: the brain's store flushes on the next
// macrotask and feeds deliver through promises, so a few event-loop turns settle both.

import { setImmediate as nextMacrotask } from "node:timers/promises";

/** Resolves after `turns` event-loop turns (each also drains the microtasks before it). */
export async function settle(turns = 5): Promise<void> {
  for (let i = 0; i < turns; i++) await nextMacrotask();
}

/** A promise with its resolver outside: a test decides when a listener's slow work ends. */
export function gate(): { readonly promise: Promise<void>; readonly open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
