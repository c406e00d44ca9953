// `to-local to-json`: prints each local state the feed delivers.

import type { LocalStateFeed } from "../../model/local.ts";
import { localStateToJson } from "./local-state-json.ts";
import { jsonDocument, type WriteText } from "./write.ts";

export interface PrintLocalOptions {
  /** Stop after the first (complete) state. */
  readonly once: boolean;
  readonly write: WriteText;
  readonly signal: AbortSignal;
}

/** Resolves after the first state with `once`, else when the signal aborts; rejects if a write fails. */
export function printLocalStates(feed: LocalStateFeed, options: PrintLocalOptions): Promise<void> {
  const { once, write, signal } = options;
  return new Promise((resolve, reject) => {
    let finished = false;
    const finish = (err?: unknown): void => {
      if (finished) return;
      finished = true;
      unsubscribe();
      signal.removeEventListener("abort", onAbort);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onAbort = (): void => finish();
    const unsubscribe = feed.subscribe(async (state) => {
      if (finished) return;
      try {
        await write(jsonDocument(localStateToJson(state)));
      } catch (err) {
        finish(err);
        return;
      }
      if (once) finish();
    });
    if (signal.aborted) finish();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
}
