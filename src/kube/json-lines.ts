// Splits a watch stream into lines. Chunks from the network cut anywhere, even inside a multi-byte
// UTF-8 character, so bytes are buffered until a newline and only then decoded, up to a bound.

import { DEFAULT_MAX_LINE_BYTES, ReadLimitError } from "./limits.ts";

export class JsonLineSplitter {
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  readonly #maxLineBytes: number;

  /** A line longer than `maxLineBytes` throws a ReadLimitError instead of growing without bound. */
  constructor(maxLineBytes = DEFAULT_MAX_LINE_BYTES) {
    this.#maxLineBytes = maxLineBytes;
  }

  /** Returns the complete lines in this chunk (without the newline), skipping blank ones. */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, start)) {
      this.#hold(chunk.subarray(start, i));
      const line = Buffer.concat(this.#pending).toString("utf8").trim();
      this.#pending = [];
      this.#pendingBytes = 0;
      if (line !== "") lines.push(line);
      start = i + 1;
    }
    if (start < chunk.length) this.#hold(chunk.subarray(start));
    return lines;
  }

  #hold(part: Buffer): void {
    this.#pendingBytes += part.length;
    if (this.#pendingBytes > this.#maxLineBytes) {
      this.#pending = [];
      this.#pendingBytes = 0;
      throw new ReadLimitError("too_large", `a watch line exceeds ${this.#maxLineBytes} bytes`);
    }
    this.#pending.push(part);
  }

  /** What is left after the stream ended: a last line without a newline, if any. */
  end(): string[] {
    const rest = Buffer.concat(this.#pending).toString("utf8").trim();
    this.#pending = [];
    this.#pendingBytes = 0;
    return rest === "" ? [] : [rest];
  }
}
