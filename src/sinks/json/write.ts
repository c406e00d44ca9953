// Where the JSON sinks print: one pretty-printed document per state, each ending in a newline,
// so `jq` and line-oriented readers both cope.

import type { Writable } from "node:stream";

/** Writes text and resolves once the stream has taken it (so an exit after it loses nothing). */
type WriteText = (text: string) => Promise<void>;

/** The reader went away (`kpng … to-json | head`): the dump is over, which is not a failure. */
class ReaderGoneError extends Error {
  constructor() {
    super("the reader of the output has gone");
    this.name = "ReaderGoneError";
  }
}

const isReaderGone = (err: unknown) => (err as NodeJS.ErrnoException | null)?.code === "EPIPE";

export function streamWriter(stream: Writable): WriteText {
  // Without a listener, a write error on a pipe is an uncaught exception; the write callback
  // below reports it to the caller.
  if (stream.listenerCount("error") === 0) stream.on("error", () => {});
  return (text) =>
    new Promise((resolve, reject) => {
      if (stream.destroyed || stream.writableEnded) {
        reject(new ReaderGoneError());
        return;
      }
      stream.write(text, (err) => {
        if (!err) resolve();
        else reject(isReaderGone(err) ? new ReaderGoneError() : err);
      });
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
 * signal aborts, a write fails (rejects), the reader goes away (resolves), or, with `once`, the
 * first document is written.
 */
export function printDocuments(
  options: PrintOptions,
  start: (print: (text: string | Iterable<string>) => Promise<void>, isFinished: () => boolean) => () => void,
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
    /** One document: a string, or its pieces in order (a large one is never held whole). */
    const print = async (text: string | Iterable<string>): Promise<void> => {
      if (finished) return;
      try {
        if (typeof text === "string") await write(text);
        else
          for (const piece of text) {
            if (finished) return;
            await write(piece);
          }
      } catch (err) {
        finish(err instanceof ReaderGoneError ? undefined : err);
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
