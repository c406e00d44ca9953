// Splits a watch stream into lines. Chunks from the network cut anywhere, even inside a multi-byte
// UTF-8 character, so bytes are buffered until a newline and only then decoded.

export class JsonLineSplitter {
  #pending: Buffer[] = [];

  /** Returns the complete lines in this chunk (without the newline), skipping blank ones. */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, start)) {
      this.#pending.push(chunk.subarray(start, i));
      const line = Buffer.concat(this.#pending).toString("utf8").trim();
      this.#pending = [];
      if (line !== "") lines.push(line);
      start = i + 1;
    }
    if (start < chunk.length) this.#pending.push(chunk.subarray(start));
    return lines;
  }

  /** What is left after the stream ended: a last line without a newline, if any. */
  end(): string[] {
    const rest = Buffer.concat(this.#pending).toString("utf8").trim();
    this.#pending = [];
    return rest === "" ? [] : [rest];
  }
}
