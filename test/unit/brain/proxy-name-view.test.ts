// One backend's share of a store serving several proxy names: a Service with all its slices,
// following the Service's label, not the slices'.

import assert from "node:assert/strict";
import { test } from "node:test";
import { ConfirmedHandover } from "../../../src/brain/handover.ts";
import { proxyNameView } from "../../../src/brain/proxy-name-view.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import { familyOf } from "../../../src/model/ip.ts";
import type { IPFamily, Service } from "../../../src/model/kube.ts";
import type { LocalService } from "../../../src/model/local.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { registry } from "../../../src/observability/metrics.ts";
import { FakeClock } from "../../support/fake-clock.ts";
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

const settled = () => new Promise((r) => setImmediate(r));

/** Two views of one store, "" and "legacy", with a handover confirmed by fake sync reports. */
async function twoViews(services = [svc({ name: "web" })]) {
  const clock = new FakeClock();
  const store = new ClusterStore({ serviceProxyNames: ["", "legacy"] });
  store.replace("Service", services);
  store.replace("EndpointSlice", [slice([ep("192.0.2.1")], { service: "web" })]);
  store.synced();
  await settled();
  /** By proxy name: whether its backend reports syncs. */
  const backends = new Map([
    ["", true],
    ["legacy", true],
  ]);
  const handover = new ConfirmedHandover({
    backends,
    fallbackMs: 60_000,
    unconfirmedMs: 4000,
    log: silentLogger,
    clock,
  });
  const plain = proxyNameView(store, "", handover);
  const legacy = proxyNameView(store, "legacy", handover);
  const told: string[][] = [];
  plain.subscribe((c) => told.push([...c.services]));
  legacy.subscribe(() => {});
  /** What a backend reports after a sync: the state holds the Services its view shows now. */
  const synced = (name: string, families: IPFamily[]) => {
    const view = name === "" ? plain : legacy;
    const services = new Map(
      [...view.serviceKeys()].map((k) => [k, localService(view.service(k)!)] as const),
    );
    handover.programmed(name, services, families);
  };
  return { clock, store, plain, legacy, told, synced, backends };
}

/** Enough of a LocalService for the handover: its key and cluster IPs. */
function localService(s: Service): LocalService {
  return {
    namespace: s.metadata.namespace,
    name: s.metadata.name,
    families: s.clusterIPs.map((ip) => ({ family: familyOf(ip), clusterIP: ip })),
  } as unknown as LocalService;
}

const fallbacks = async () =>
  (await registry.getMetricsAsJSON())
    .find((m) => m.name === "kpng_handover_fallbacks_total")
    ?.values.reduce((n, v) => n + v.value, 0) ?? 0;

test("a relabelled Service stays with the losing view until the gaining backend confirms a sync holding it", async () => {
  const { plain, legacy, told, store, synced } = await twoViews();
  store.upsert(svc({ name: "web", labels: LEGACY }));
  await settled();
  // Both show it during the handover: the gaining backend programs it first.
  assert.equal(plain.service("ns/web")?.metadata.labels[LEGACY_KEY], undefined);
  assert.equal(plain.slicesOf("ns/web").length, 1);
  assert.ok(legacy.service("ns/web"));
  // The losing backend's own syncs confirm nothing.
  synced("", ["IPv4"]);
  await settled();
  assert.ok(plain.service("ns/web"));
  synced("legacy", ["IPv4"]);
  await settled();
  assert.equal(plain.service("ns/web"), undefined, "released by the gainer's sync");
  assert.deepEqual(told.at(-1), ["ns/web"]);
});

test("a dual-stack Service waits for both families of the gaining backend", async () => {
  const dual = { clusterIP: "198.51.100.10", clusterIPs: ["198.51.100.10", "2001:db8::10"] };
  const { plain, store, synced } = await twoViews([svc({ name: "web", ...dual })]);
  synced("legacy", ["IPv4", "IPv6"]);
  store.upsert(svc({ name: "web", labels: LEGACY, ...dual }));
  await settled();
  synced("legacy", ["IPv4"]);
  await settled();
  assert.ok(plain.service("ns/web"), "IPv6 not programmed yet");
  synced("legacy", ["IPv6"]);
  await settled();
  assert.equal(plain.service("ns/web"), undefined);
});

test("a gaining backend that never confirms: released at the fallback, logged and counted", async () => {
  const { plain, store, clock } = await twoViews();
  const before = await fallbacks();
  store.upsert(svc({ name: "web", labels: LEGACY }));
  await settled();
  await clock.advance(59_999);
  assert.ok(plain.service("ns/web"));
  await clock.advance(1);
  assert.equal(plain.service("ns/web"), undefined);
  assert.equal(await fallbacks(), before + 1);
});

test("a gaining backend that reports no syncs is waited for the short time; one that starts reporting, the full one", async () => {
  const { plain, store, clock, backends } = await twoViews([svc({ name: "web" }), svc({ name: "db" })]);
  backends.set("legacy", false);
  const before = await fallbacks();
  store.upsert(svc({ name: "web", labels: LEGACY }));
  await settled();
  await clock.advance(3999);
  assert.ok(plain.service("ns/web"));
  await clock.advance(1);
  assert.equal(plain.service("ns/web"), undefined, "released after the short wait");
  assert.equal(await fallbacks(), before + 1);

  // Its first report comes right after the relabel: it is then waited for as one that reports.
  store.upsert(svc({ name: "db", labels: LEGACY }));
  await settled();
  backends.set("legacy", true);
  await clock.advance(4000);
  assert.ok(plain.service("ns/db"), "a backend reporting syncs gets the full wait");
  await clock.advance(56_000);
  assert.equal(plain.service("ns/db"), undefined);
  assert.equal(await fallbacks(), before + 2);
});

test("nothing to hand over: a proxy name nobody here serves, a headless Service", async () => {
  const headless = svc({ name: "hl", clusterIP: "None", clusterIPs: [] });
  const { plain, store } = await twoViews([svc({ name: "web" }), headless]);
  store.upsert(svc({ name: "web", labels: { [LEGACY_KEY]: "elsewhere" } }));
  store.upsert(svc({ name: "hl", labels: LEGACY, clusterIP: "None", clusterIPs: [] }));
  await settled();
  assert.equal(plain.service("ns/web"), undefined);
  assert.equal(plain.service("ns/hl"), undefined);
});

test("a Service relabelled back during the handover stays, and a deleted one goes at once", async () => {
  const { plain, store, clock, synced } = await twoViews([svc({ name: "web" }), svc({ name: "gone" })]);
  store.upsert(svc({ name: "web", labels: LEGACY }));
  await settled();
  store.upsert(svc({ name: "web" }));
  store.delete("Service", "ns/gone");
  await settled();
  assert.equal(plain.service("ns/gone"), undefined);
  synced("legacy", ["IPv4"]);
  await clock.advance(60_000);
  assert.ok(plain.service("ns/web"), "its own again: no handover left to end");
});
