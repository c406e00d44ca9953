import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { computeLocalService } from "../../../src/brain/local-service.ts";
import { LocalServiceCache } from "../../../src/brain/local-service-cache.ts";
import { LABEL_ZONE } from "../../../src/model/kube.ts";
import { ep, slice, svc } from "./fixtures.ts";

const at = (name: string, zone = "z1") => ({ name, labels: { [LABEL_ZONE]: zone } });

describe("LocalServiceCache", () => {
  const service = svc();
  const slices = [
    slice([
      ep("10.0.0.1", { node: "host-a", zoneHints: ["z1"] }),
      ep("10.0.0.2", { node: "host-b", zoneHints: ["z2"] }),
    ]),
  ];
  const cache = new LocalServiceCache();

  const rows: [rule: string, a: ReturnType<typeof at>, b: ReturnType<typeof at>, shared: boolean][] = [
    ["two nodes of one zone that host no endpoint share one object", at("n1"), at("n2"), true],
    ["nodes of two zones do not (zone hints pick other endpoints)", at("n1", "z1"), at("n3", "z2"), false],
    ["a node that hosts an endpoint gets its own", at("n1"), at("host-a"), false],
  ];
  for (const [rule, a, b, shared] of rows) {
    it(rule, () => {
      const x = cache.compute(service, slices, a);
      const y = cache.compute(service, slices, b);
      assert.equal(x === y, shared);
      // Whatever is shared, each node's result is what computing it alone gives.
      assert.deepEqual(x, computeLocalService(service, slices, a));
      assert.deepEqual(y, computeLocalService(service, slices, b));
    });
  }

  it("a node named by a node hint gets its own", () => {
    const hinted = [slice([ep("10.0.0.1", { node: "host-a", nodeHints: ["n9"] })])];
    const x = cache.compute(service, hinted, at("n9"));
    const y = cache.compute(service, hinted, at("n1"));
    assert.notEqual(x, y);
    assert.deepEqual(x, computeLocalService(service, hinted, at("n9")));
    assert.deepEqual(y, computeLocalService(service, hinted, at("n1")));
  });

  it("new slices (a new array) are computed again", () => {
    const first = cache.compute(service, slices, at("n1"));
    const moved = [slice([ep("10.0.0.7", { node: "host-c" })])];
    const second = cache.compute(service, moved, at("n1"));
    assert.notEqual(first, second);
    assert.deepEqual(second, computeLocalService(service, moved, at("n1")));
  });
});
