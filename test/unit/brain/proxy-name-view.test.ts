// One backend's share of a store serving several proxy names: a Service with all its slices,
// following the Service's label, not the slices'.

import assert from "node:assert/strict";
import { test } from "node:test";
import { proxyNameView } from "../../../src/brain/proxy-name-view.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import { ep, slice, svc } from "./fixtures.ts";

const LEGACY_KEY = "service.kubernetes.io/service-proxy-name";
const LEGACY = { [LEGACY_KEY]: "legacy" };

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

/** Timers that fire only when the test calls them. */
function fakeTimers() {
  const pending: { fn: () => void; cancelled: boolean }[] = [];
  const timers = {
    setTimeout: (fn: () => void) => {
      const t = { fn, cancelled: false };
      pending.push(t);
      return t;
    },
    clearTimeout: (t: unknown) => {
      (t as { cancelled: boolean }).cancelled = true;
    },
  };
  return { pending, timers };
}

test("a Service relabelled away stays with the losing view until the handover ends", async () => {
  const { pending, timers } = fakeTimers();
  const store = new ClusterStore({ serviceProxyNames: ["", "legacy"] });
  store.replace("Service", [svc({ name: "web" })]);
  store.replace("EndpointSlice", [slice([ep("192.0.2.1")], { service: "web" })]);
  store.synced();
  await new Promise((r) => setImmediate(r));
  const plain = proxyNameView(store, "", 5000, timers);
  const legacy = proxyNameView(store, "legacy", 5000, timers);
  const told: string[][] = [];
  plain.subscribe((c) => told.push([...c.services]));
  legacy.subscribe(() => {});

  store.upsert(svc({ name: "web", labels: LEGACY }));
  await new Promise((r) => setImmediate(r));
  // Both show it during the handover: the gaining backend programs it first.
  assert.equal(plain.service("ns/web")?.metadata.labels[LEGACY_KEY], undefined);
  assert.ok(plain.service("ns/web"));
  assert.equal(plain.slicesOf("ns/web").length, 1);
  assert.ok(legacy.service("ns/web"));
  assert.equal(pending.length, 1);

  pending[0]?.fn();
  assert.equal(plain.service("ns/web"), undefined);
  assert.deepEqual(told.at(-1), ["ns/web"]);
});

test("a Service relabelled back during the handover stays, and a deleted one goes at once", async () => {
  const { pending, timers } = fakeTimers();
  const store = new ClusterStore({ serviceProxyNames: ["", "legacy"] });
  store.replace("Service", [svc({ name: "web" }), svc({ name: "gone" })]);
  store.synced();
  await new Promise((r) => setImmediate(r));
  const plain = proxyNameView(store, "", 5000, timers);
  plain.subscribe(() => {});
  store.upsert(svc({ name: "web", labels: LEGACY }));
  await new Promise((r) => setImmediate(r));
  store.upsert(svc({ name: "web" }));
  store.delete("Service", "ns/gone");
  await new Promise((r) => setImmediate(r));
  assert.equal(pending[0]?.cancelled, true);
  assert.ok(plain.service("ns/web"));
  assert.equal(plain.service("ns/gone"), undefined);
});
