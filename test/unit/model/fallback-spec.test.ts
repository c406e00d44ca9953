import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { readFallbackSpec } from "../../../src/model/fallback-spec.ts";

const SELECTOR = "fallback.kpng.io/selector";
const DELAY = "fallback.kpng.io/return-delay";

interface Row {
  readonly name: string;
  readonly annotations: Record<string, string>;
  readonly expect:
    | "none"
    | "invalid"
    | { readonly delayMs: number; readonly selects: Record<string, string> };
}

const rows: Row[] = [
  { name: "no annotation: no fallback", annotations: {}, expect: "none" },
  { name: "a return delay alone does nothing", annotations: { [DELAY]: "5s" }, expect: "none" },
  {
    name: "a selector alone: the return delay defaults to 10s",
    annotations: { [SELECTOR]: "app=sorry-page" },
    expect: { delayMs: 10_000, selects: { app: "sorry-page" } },
  },
  {
    name: "set-based selector and a return delay of 1m30s",
    annotations: { [SELECTOR]: "app in (web),track!=canary", [DELAY]: "1m30s" },
    expect: { delayMs: 90_000, selects: { app: "web" } },
  },
  {
    name: "a return delay of 0 returns as soon as the primary is ready",
    annotations: { [SELECTOR]: "a=b", [DELAY]: "0" },
    expect: { delayMs: 0, selects: { a: "b" } },
  },
  {
    name: "an empty selector would select every pod: invalid",
    annotations: { [SELECTOR]: " " },
    expect: "invalid",
  },
  {
    name: "an unparsable selector is invalid",
    annotations: { [SELECTOR]: "app in (web" },
    expect: "invalid",
  },
  {
    name: "return delay banana is invalid",
    annotations: { [SELECTOR]: "app=x", [DELAY]: "banana" },
    expect: "invalid",
  },
  {
    name: "a negative return delay is invalid",
    annotations: { [SELECTOR]: "app=x", [DELAY]: "-1s" },
    expect: "invalid",
  },
  {
    name: "a return delay over a day is invalid",
    annotations: { [SELECTOR]: "app=x", [DELAY]: "25h" },
    expect: "invalid",
  },
];

describe("fallback annotations", () => {
  for (const row of rows) {
    test(row.name, () => {
      const spec = readFallbackSpec(row.annotations);
      if (row.expect === "none" || row.expect === "invalid") {
        assert.equal(spec.kind, row.expect);
        if (spec.kind === "invalid") assert.match(spec.reason, /fallback\.kpng\.io\//);
        return;
      }
      assert.equal(spec.kind, "valid");
      if (spec.kind !== "valid") return;
      assert.equal(spec.returnDelayMs, row.expect.delayMs);
      assert.ok(spec.selector.matches(row.expect.selects));
    });
  }
});
