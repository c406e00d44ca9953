// The pure parts of the kube source: line splitting and backoff.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Backoff } from "../../../../src/kube/backoff.ts";
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

describe("Backoff", () => {
  it("doubles from the initial delay up to the cap", () => {
    const backoff = new Backoff({ initialMs: 500, maxMs: 30_000, jitter: 0 });
    const delays = Array.from({ length: 9 }, () => backoff.next());
    assert.deepEqual(delays, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  });

  it("starts over after a reset", () => {
    const backoff = new Backoff({ initialMs: 100, maxMs: 1000, jitter: 0 });
    backoff.next();
    backoff.next();
    backoff.reset();
    assert.equal(backoff.next(), 100);
  });

  it("jitter takes up to its fraction off the delay", () => {
    const low = new Backoff({ initialMs: 1000, maxMs: 1000, jitter: 0.5, random: () => 1 });
    const high = new Backoff({ initialMs: 1000, maxMs: 1000, jitter: 0.5, random: () => 0 });
    assert.equal(low.next(), 500);
    assert.equal(high.next(), 1000);
  });
});
