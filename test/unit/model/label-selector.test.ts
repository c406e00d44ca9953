import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { LabelSelectorError, parseLabelSelector } from "../../../src/model/label-selector.ts";

const WEB = { app: "web" };
const WEB_CANARY = { app: "web", track: "canary" };
const SORRY = { app: "sorry-page", "example.com/tier": "edge" };

interface Row {
  readonly selector: string;
  readonly selects: readonly Record<string, string>[];
  readonly skips: readonly Record<string, string>[];
}

const rows: Row[] = [
  { selector: "app=sorry-page", selects: [SORRY], skips: [WEB, {}] },
  { selector: "app==web", selects: [WEB, WEB_CANARY], skips: [SORRY] },
  { selector: "app in (web),track!=canary", selects: [WEB], skips: [WEB_CANARY, SORRY] },
  { selector: "app notin (web, other)", selects: [SORRY, {}], skips: [WEB] },
  { selector: "track", selects: [WEB_CANARY], skips: [WEB] },
  { selector: "!track", selects: [WEB], skips: [WEB_CANARY] },
  { selector: " example.com/tier = edge ", selects: [SORRY], skips: [WEB] },
  { selector: "track=", selects: [{ track: "" }], skips: [WEB_CANARY, WEB] },
  { selector: "", selects: [WEB, {}], skips: [] },
];

const invalid = [
  "app=web,",
  "=web",
  "app in (web",
  "app in web",
  "app=we b",
  "Example.com/tier=edge",
  "app=-web",
  `app=${"x".repeat(64)}`,
  "app>1",
  "app in ((web))",
];

describe("label selectors", () => {
  for (const row of rows) {
    test(`${JSON.stringify(row.selector)} selects what it says`, () => {
      const selector = parseLabelSelector(row.selector);
      for (const labels of row.selects) assert.ok(selector.matches(labels), JSON.stringify(labels));
      for (const labels of row.skips) assert.ok(!selector.matches(labels), JSON.stringify(labels));
    });
  }
  for (const text of invalid) {
    test(`${JSON.stringify(text)} is refused`, () => {
      assert.throws(() => parseLabelSelector(text), LabelSelectorError);
    });
  }
  test('"app=" selects an empty value (valid in Kubernetes)', () => {
    assert.ok(parseLabelSelector("app=").matches({ app: "" }));
  });
});
