import assert from "node:assert/strict";
import { test } from "node:test";
import { LineLocator } from "../../../../src/sources/file/lines.ts";

test("LineLocator gives 1-based lines and columns, in any order, for text and bytes", () => {
  const text = "ab\ncd\n\nefg";
  for (const content of [text, Buffer.from(text)]) {
    const lines = new LineLocator(content);
    const cases: [number, { line: number; col: number }][] = [
      [0, { line: 1, col: 1 }],
      [4, { line: 2, col: 2 }],
      [6, { line: 3, col: 1 }],
      [9, { line: 4, col: 3 }],
      [2, { line: 1, col: 3 }],
      [3, { line: 2, col: 1 }],
    ];
    for (const [offset, want] of cases) assert.deepEqual(lines.locate(offset), want, `offset ${offset}`);
  }
});
