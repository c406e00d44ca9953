// Offsets in a file's text or bytes → line and column, for messages. Only invalid objects and
// syntax errors ask, so nothing is indexed up front: the locator counts newlines on demand, moving
// forward from its last answer (objects are located in file order).

/** Where the next "\n" at or after `from` is, or -1. */
export type NewlineFinder = (from: number) => number;

export class LineLocator {
  readonly #nextNewline: NewlineFinder;
  #line = 1;
  #lineStart = 0;

  /** Over the content, or over a finder that looks for newlines elsewhere (a file read again). */
  constructor(content: string | Uint8Array | NewlineFinder) {
    if (typeof content === "function") this.#nextNewline = content;
    else if (typeof content === "string") this.#nextNewline = (from) => content.indexOf("\n", from);
    else {
      const bytes = Buffer.from(content.buffer, content.byteOffset, content.byteLength);
      this.#nextNewline = (from) => bytes.indexOf(10, from);
    }
  }

  /** The 1-based line and column of `offset` (columns count UTF-16 units or bytes, as the content does). */
  locate(offset: number): { line: number; col: number } {
    if (offset < this.#lineStart) {
      this.#line = 1;
      this.#lineStart = 0;
    }
    for (;;) {
      const newline = this.#nextNewline(this.#lineStart);
      if (newline < 0 || newline >= offset) break;
      this.#line++;
      this.#lineStart = newline + 1;
    }
    return { line: this.#line, col: offset - this.#lineStart + 1 };
  }
}
