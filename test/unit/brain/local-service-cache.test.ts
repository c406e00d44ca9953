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

  it("zones that see the service alike (no hints) share one object", () => {
    const plain = [slice([ep("10.0.0.1", { node: "host-a" }), ep("10.0.0.2", { node: "host-b" })])];
    const z1 = cache.compute(service, plain, at("n1", "z1"));
    const z2 = cache.compute(service, plain, at("n3", "z2"));
    const z3 = cache.compute(service, plain, at("n4", "z3"));
    assert.equal(z1, z2);
    assert.equal(z1, z3);
    assert.deepEqual(z2, computeLocalService(service, plain, at("n3", "z2")));
  });

  it("nodes that host endpoints, computed one after another, each see only their own as local", () => {
    // Every node after the first computes from the views the first one left: what one node
    // made of an endpoint must not reach another.
    const local = svc({ type: "NodePort", externalTrafficPolicy: "Local", internalTrafficPolicy: "Local" });
    const hosted = [
      slice([
        ep("10.0.0.1", { node: "host-a" }),
        ep("10.0.0.2", { node: "host-b", ready: false, terminating: true }),
        ep("10.0.0.3", { node: "host-c" }),
        ep("10.0.0.4", { node: "" }),
      ]),
    ];
    for (const service of [svc(), local]) {
      const nodes = [at("n1"), at("host-a"), at("host-b"), at("host-c", "z2"), at("n2", "z2"), at("host-a")];
      for (const node of nodes) {
        const got = cache.compute(service, hosted, node);
        assert.deepEqual(got, computeLocalService(service, hosted, node), `${node.name}`);
        const localIPs = got?.ports.flatMap((p) =>
          p.internalEndpoints.filter((e) => e.local).map((e) => e.ip),
        );
        // host-b's endpoint is terminating: used only where no ready endpoint is (its own, under Local).
        const own: Record<string, string> = { "host-a": "10.0.0.1", "host-c": "10.0.0.3" };
        if (service === local) own["host-b"] = "10.0.0.2";
        assert.deepEqual(localIPs, own[node.name] === undefined ? [] : [own[node.name]], node.name);
      }
    }
  });

  it("new slices (a new array) are computed again", () => {
    const first = cache.compute(service, slices, at("n1"));
    const moved = [slice([ep("10.0.0.7", { node: "host-c" })])];
    const second = cache.compute(service, moved, at("n1"));
    assert.notEqual(first, second);
    assert.deepEqual(second, computeLocalService(service, moved, at("n1")));
  });
});
