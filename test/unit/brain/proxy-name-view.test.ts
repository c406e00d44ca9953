// One backend's share of a store serving several proxy names: a Service with all its slices,
// following the Service's label, not the slices'.

import assert from "node:assert/strict";
import { test } from "node:test";
import { proxyNameView } from "../../../src/brain/proxy-name-view.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import { ep, slice, svc } from "./fixtures.ts";

const LEGACY = { "service.kubernetes.io/service-proxy-name": "legacy" };

test("a relabelled Service moves with its slices, even before they are relabelled", () => {
  const store = new ClusterStore({ serviceProxyNames: ["", "legacy"] });
  store.replace("Service", [svc({ name: "web" }), svc({ name: "old", labels: LEGACY })]);
  store.replace("EndpointSlice", [
    slice([ep("192.0.2.1")], { service: "web" }),
    slice([ep("192.0.2.2")], { service: "old", labels: { "kubernetes.io/service-name": "old", ...LEGACY } }),
  ]);
  store.synced();
  const plain = proxyNameView(store, "");
  const legacy = proxyNameView(store, "legacy");
  assert.deepEqual(
    [...plain.services()].map((s) => s.metadata.name),
    ["web"],
  );
  assert.deepEqual(
    [...legacy.services()].map((s) => s.metadata.name),
    ["old"],
  );
  assert.equal(plain.slicesOf("ns/old").length, 0);

  store.upsert(svc({ name: "web", labels: LEGACY }));
  assert.equal(plain.service("ns/web"), undefined);
  assert.equal(legacy.slicesOf("ns/web").length, 1);
  assert.deepEqual(legacy.serviceCIDRs(), []);
});
