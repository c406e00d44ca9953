import assert from "node:assert/strict";
import { test } from "node:test";
import { isSuspiciousShrink } from "../../../../src/sources/file/shrink.ts";

test("isSuspiciousShrink: empty or more than half gone, for files big enough to tell", () => {
  const cases: [before: number, after: number, suspicious: boolean][] = [
    [0, 0, false],
    [0, 5, false],
    [1, 0, true],
    [9, 0, true],
    [9, 4, true],
    [9, 5, false],
    [9, 9, false],
    [9, 20, false],
    [4, 1, true],
    [4, 2, false],
    [3, 1, false],
  ];
  for (const [before, after, suspicious] of cases) {
    assert.equal(isSuspiciousShrink(before, after), suspicious, `${before} -> ${after}`);
  }
});
