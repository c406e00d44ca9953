// The pure parts of the kube source: line splitting and backoff.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { JsonLineSplitter } from "../../../../src/kube/json-lines.ts";

describe("JsonLineSplitter", () => {
  const cases: { name: string; chunks: string[]; lines: string[]; rest: string[] }[] = [
    {
      name: "one chunk with two lines",
      chunks: ['{"a":1}\n{"b":2}\n'],
      lines: ['{"a":1}', '{"b":2}'],
      rest: [],
    },
    { name: "a line split across chunks", chunks: ['{"a"', ":1}\n"], lines: ['{"a":1}'], rest: [] },
    { name: "blank lines are skipped", chunks: ["\n\n{}\n\n"], lines: ["{}"], rest: [] },
    { name: "a last line without newline is kept for end()", chunks: ["{}\n{"], lines: ["{}"], rest: ["{"] },
    { name: "CRLF endings are trimmed", chunks: ["{}\r\n"], lines: ["{}"], rest: [] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const splitter = new JsonLineSplitter();
      const lines = c.chunks.flatMap((chunk) => splitter.push(Buffer.from(chunk)));
      assert.deepEqual(lines, c.lines);
      assert.deepEqual(splitter.end(), c.rest);
    });
  }

  it("a multi-byte character cut between chunks decodes whole", () => {
    const bytes = Buffer.from('{"n":"✓"}\n');
    const splitter = new JsonLineSplitter();
    const lines = [...bytes].flatMap((b) => splitter.push(Buffer.from([b])));
    assert.deepEqual(lines, ['{"n":"✓"}']);
  });
});
