import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { lineSplitter } from "../../../src/lib/line-splitter.ts";

function split(chunks: readonly (Buffer | string)[], maxLine?: number): string[] {
  const out: string[] = [];
  const lines = lineSplitter((l) => out.push(l), maxLine);
  for (const c of chunks) lines.push(c);
  lines.end();
  return out;
}

describe("lineSplitter", () => {
  test("lines split across chunks come out whole, empty ones included", () => {
    assert.deepEqual(split(["a\nb", "c\n\nd"]), ["a", "bc", "", "d"]);
  });

  test("a last line without a newline is handed on at the end", () => {
    assert.deepEqual(split(["x\ny"]), ["x", "y"]);
    assert.deepEqual(split(["x\n"]), ["x"]);
  });

  test("a character split between two buffers is decoded whole", () => {
    const bytes = Buffer.from("zoné\n");
    assert.deepEqual(split([bytes.subarray(0, 4), bytes.subarray(4)]), ["zoné"]);
  });

  test("text held back past the bound is handed on cut, the rest of it dropped", () => {
    assert.deepEqual(split(["abcdefgh", "ij\nk\n"], 5), ["abcde", "ij", "k"]);
  });
});
