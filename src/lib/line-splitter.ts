// Text that arrives in chunks (a command's output on a pipe) handed on a whole line at a time.

import { StringDecoder } from "node:string_decoder";

interface LineSplitter {
  push(chunk: Buffer | string): void;
  /** Hands on a last line that has no newline. */
  end(): void;
}

/**
 * `onLine` for every line of the chunks pushed, empty lines included. Text held back for a line
 * never grows past `maxLine`: once it does, it is handed on cut to that length and the rest is
 * dropped (what later chunks bring of the same line comes out as lines of its own).
 */
export function lineSplitter(
  onLine: (line: string) => void,
  maxLine = Number.POSITIVE_INFINITY,
): LineSplitter {
  // A character split between two chunks is decoded once both are here.
  const decoder = new StringDecoder("utf8");
  let partial = "";
  return {
    push(chunk) {
      const lines = (partial + (typeof chunk === "string" ? chunk : decoder.write(chunk))).split("\n");
      partial = lines.pop() ?? "";
      if (partial.length > maxLine) {
        lines.push(partial.slice(0, maxLine));
        partial = "";
      }
      for (const line of lines) onLine(line);
    },
    end() {
      partial += decoder.end();
      if (partial !== "") onLine(partial);
      partial = "";
    },
  };
}
