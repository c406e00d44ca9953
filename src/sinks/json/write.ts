// Where the JSON sinks print: one pretty-printed document per state, each ending in a newline,
// so `jq` and line-oriented readers both cope.

import type { Writable } from "node:stream";

/** Writes text and resolves once the stream has taken it (so an exit after it loses nothing). */
export type WriteText = (text: string) => Promise<void>;

export function streamWriter(stream: Writable): WriteText {
  return (text) =>
    new Promise((resolve, reject) => {
      stream.write(text, (err) => (err ? reject(err) : resolve()));
    });
}

export function jsonDocument(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

export interface PrintOptions {
  /** Stop after the first document. */
  readonly once: boolean;
  readonly write: WriteText;
  readonly signal: AbortSignal;
}

/**
 * Runs `start` (which subscribes to a source of documents and returns its unsubscribe) until the
 * signal aborts, a write fails (rejects), or, with `once`, the first document is written.
 */
export function printDocuments(
  options: PrintOptions,
  start: (print: (text: string) => Promise<void>, isFinished: () => boolean) => () => void,
): Promise<void> {
  const { once, write, signal } = options;
  return new Promise((resolve, reject) => {
    let finished = false;
    let unsubscribe: (() => void) | undefined;
    const finish = (err?: unknown): void => {
      if (finished) return;
      finished = true;
      unsubscribe?.();
      signal.removeEventListener("abort", onAbort);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onAbort = (): void => finish();
    const print = async (text: string): Promise<void> => {
      if (finished) return;
      try {
        await write(text);
      } catch (err) {
        finish(err);
        return;
      }
      if (once) finish();
    };
    const stop = start(print, () => finished);
    if (finished) stop();
    else unsubscribe = stop;
    if (signal.aborted) finish();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
}
