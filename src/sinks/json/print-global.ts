// `<source> to-json`: prints the global model once the store has synced, then on each change.

import type { StoreChange } from "../../brain/store.ts";
import { type GlobalStateView, globalStateToJson } from "./global-state-json.ts";
import { jsonDocument, type WriteText } from "./write.ts";

/** The part of the ClusterStore this sink reads. */
export interface SubscribableGlobalState extends GlobalStateView {
  readonly isSynced: boolean;
  subscribe(listener: (change: StoreChange) => void): () => void;
}

export interface PrintGlobalOptions {
  readonly once: boolean;
  readonly write: WriteText;
  readonly signal: AbortSignal;
}

export function printGlobalStates(
  store: SubscribableGlobalState,
  options: PrintGlobalOptions,
): Promise<void> {
  const { once, write, signal } = options;
  return new Promise((resolve, reject) => {
    let finished = false;
    let lastPrinted: string | undefined;
    // Writes are chained so documents never interleave; a change during a write is printed after.
    let writing: Promise<void> = Promise.resolve();
    const finish = (err?: unknown): void => {
      if (finished) return;
      finished = true;
      unsubscribe();
      signal.removeEventListener("abort", onAbort);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onAbort = (): void => finish();
    const printIfChanged = (): void => {
      if (finished || !store.isSynced) return;
      const text = jsonDocument(globalStateToJson(store));
      // The store may report its sync after we already printed the synced state.
      if (text === lastPrinted) return;
      lastPrinted = text;
      writing = writing.then(async () => {
        if (finished) return;
        try {
          await write(text);
        } catch (err) {
          finish(err);
          return;
        }
        if (once) finish();
      });
    };
    const unsubscribe = store.subscribe(printIfChanged);
    if (signal.aborted) finish();
    else signal.addEventListener("abort", onAbort, { once: true });
    printIfChanged();
  });
}
