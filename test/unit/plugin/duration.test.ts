import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseDuration } from "../../../src/plugin/duration.ts";

describe("parseDuration", () => {
  const valid: { name: string; text: string; ms: number }[] = [
    { name: "seconds", text: "1s", ms: 1000 },
    { name: "milliseconds", text: "250ms", ms: 250 },
    { name: "minutes and seconds add up", text: "1m30s", ms: 90_000 },
    { name: "hours", text: "2h", ms: 7_200_000 },
    { name: "fractions", text: "1.5s", ms: 1500 },
    { name: "a bare zero", text: "0", ms: 0 },
    { name: "zero with a unit", text: "0s", ms: 0 },
  ];
  for (const tc of valid)
    test(`accepts ${tc.name}: ${tc.text}`, () => assert.equal(parseDuration(tc.text), tc.ms));

  const invalid: { name: string; text: string }[] = [
    { name: "a number without a unit", text: "5" },
    { name: "an unknown unit", text: "5d" },
    { name: "a negative duration", text: "-1s" },
    { name: "an empty string", text: "" },
    { name: "trailing garbage", text: "1sx" },
    { name: "words", text: "soon" },
  ];
  for (const tc of invalid) {
    test(`rejects ${tc.name}, saying which forms work`, () =>
      assert.throws(() => parseDuration(tc.text), /is not a duration: .*e\.g\. 1s, 250ms/));
  }
});
