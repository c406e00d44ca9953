import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { readClusterFile } from "../../../tools/demo/demo-plan.ts";
import { fallbackStories, switchFallback } from "../../../tools/demo/fallback-act.ts";

const text = readFileSync(new URL("../../../examples/cluster.yaml", import.meta.url), "utf8");

describe("the demo's fallback act", () => {
  test("the example's status Service is the story: its own pod and the sorry page", () => {
    assert.deepEqual(fallbackStories(readClusterFile(text)), [
      {
        namespace: "default",
        name: "status",
        primaryPods: ["status-9d8c7-abcde"],
        fallbackPods: ["sorry-page-1a2b3-abcde"],
      },
    ]);
  });

  for (const fallback of [false, true]) {
    test(`switched ${fallback ? "to" : "away from"} the fallback, as the controller writes it`, () => {
      const [story] = fallbackStories(readClusterFile(text));
      const switched = readClusterFile(switchFallback(text, story!, fallback));
      const slices = switched.endpointSlices.filter((s) => s.serviceName === "status");
      const own = slices.find(
        (s) => s.metadata.labels["endpointslice.kubernetes.io/managed-by"] === undefined,
      );
      const fb = slices.find(
        (s) => s.metadata.labels["endpointslice.kubernetes.io/managed-by"] !== undefined,
      );
      assert.equal(fb?.metadata.labels["fallback.kpng.io/active"], String(fallback));
      assert.equal(fb?.endpoints[0]?.conditions.ready, fallback);
      assert.equal(fb?.endpoints[0]?.conditions.serving, fallback, "an inactive fallback draws no traffic");
      assert.equal(own?.endpoints[0]?.conditions.ready, !fallback);
      // Nothing else changes.
      const original = readClusterFile(text);
      assert.equal(switched.services.length, original.services.length);
      assert.equal(switched.endpointSlices.length, original.endpointSlices.length);
      assert.deepEqual(
        switched.endpointSlices.filter((s) => s.serviceName === "web"),
        original.endpointSlices.filter((s) => s.serviceName === "web"),
      );
    });
  }
});
