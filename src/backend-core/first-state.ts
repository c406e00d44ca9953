// --dry-run of every backend: the first state of the feed only, then stop.

import type { LocalState, LocalStateFeed } from "../model/local.ts";

/** Runs `work` on the first state of the feed only (the feed may call back before subscribe returns). */
export async function withFirstState(
  feed: LocalStateFeed,
  signal: AbortSignal,
  work: (state: LocalState) => Promise<unknown>,
): Promise<void> {
  let done = false;
  let unsubscribe = () => {};
  await new Promise<void>((resolve, reject) => {
    unsubscribe = feed.subscribe(async (state) => {
      if (done) return;
      done = true;
      await work(state).then(() => resolve(), reject);
    });
    signal.addEventListener("abort", () => resolve());
  });
  unsubscribe();
}
