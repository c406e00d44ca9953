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

describe("parseDuration with bounds", () => {
  const cases: { text: string; bounds: { min?: number; max?: number }; want: number | RegExp }[] = [
    { text: "0", bounds: { min: 1000 }, want: /"0" is too short: it must be at least 1s/ },
    { text: "999ms", bounds: { min: 1000 }, want: /at least 1s/ },
    { text: "1s", bounds: { min: 1000 }, want: 1000 },
    { text: "30s", bounds: { min: 1000, max: 60_000 }, want: 30_000 },
    { text: "2m", bounds: { max: 60_000 }, want: /"2m" is too long: it must be at most 1m/ },
    { text: "0", bounds: {}, want: 0 },
    { text: "soon", bounds: { min: 1 }, want: /is not a duration/ },
  ];
  for (const tc of cases) {
    test(`${tc.text} with ${JSON.stringify(tc.bounds)}`, () => {
      if (typeof tc.want === "number") assert.equal(parseDuration(tc.text, tc.bounds), tc.want);
      else assert.throws(() => parseDuration(tc.text, tc.bounds), tc.want);
    });
  }
});
