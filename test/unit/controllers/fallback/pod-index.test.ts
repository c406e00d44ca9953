import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { PodIndex } from "../../../../src/controllers/fallback/pod-index.ts";
import { parseLabelSelector } from "../../../../src/model/label-selector.ts";
import { pod } from "./fixtures.ts";

const names = (list: readonly { metadata: { name: string } }[]) => list.map((p) => p.metadata.name).sort();

describe("pods by namespace and label", () => {
  const a = pod("a", "203.0.113.1", { labels: { app: "sorry", tier: "web" } });
  const b = pod("b", "203.0.113.2", { labels: { app: "waker" } });
  const c = pod("c", "203.0.113.3", { labels: { app: "sorry", tier: "db" } });
  const other = {
    ...pod("d", "203.0.113.4"),
    metadata: { ...pod("d", "203.0.113.4").metadata, namespace: "other" },
  };

  const rows: [selector: string, expect: string[]][] = [
    ["app=sorry", ["a", "c"]],
    ["app in (sorry, waker)", ["a", "b", "c"]],
    ["app=sorry,tier!=db", ["a"]],
    ["tier", ["a", "c"]],
    ["!tier", ["b"]],
    ["app notin (sorry)", ["b"]],
    ["app=nobody", []],
  ];
  for (const [selector, expect] of rows) {
    test(`${selector} → ${expect.join(", ") || "nothing"} (only in its namespace)`, () => {
      const index = new PodIndex();
      for (const p of [a, b, c, other]) index.update(undefined, p);
      assert.deepEqual(names(index.matching("ns", parseLabelSelector(selector))), expect);
    });
  }

  test("a pod relabelled or deleted leaves its old labels' sets", () => {
    const index = new PodIndex();
    index.update(undefined, a);
    const relabelled = { ...a, metadata: { ...a.metadata, labels: { app: "waker" } } };
    index.update(a, relabelled);
    assert.deepEqual(names(index.matching("ns", parseLabelSelector("app=sorry"))), []);
    assert.deepEqual(names(index.matching("ns", parseLabelSelector("app=waker"))), ["a"]);
    index.update(relabelled, undefined);
    assert.deepEqual(names(index.matching("ns", parseLabelSelector("app"))), []);
  });
});
