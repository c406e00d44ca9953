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
