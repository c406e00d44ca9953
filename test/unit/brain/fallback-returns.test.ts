// The return delay kept by the proxy itself: a controller that died, or never marks the fallback
// inactive, cannot hold traffic on the fallback once the primary has been ready for the delay.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { FallbackReturns, slicesInEffect } from "../../../src/brain/fallback.ts";
import { computeLocalService } from "../../../src/brain/local-service.ts";
import { LocalStateTracker } from "../../../src/brain/local-state-tracker.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import type { EndpointSlice, Service, SliceEndpoint } from "../../../src/model/kube.ts";
import { endpointString } from "../../../src/model/local.ts";
import { FakeClock } from "../../support/fake-clock.ts";
import { ep, node, slice, svc, THIS_NODE, terminating } from "./fixtures.ts";

const PRIMARY = "203.0.113.1";
const FALLBACK = "203.0.113.21";

const annotated = (annotations: Record<string, string>): Service => svc({ annotations });
const WEB = annotated({ "fallback.kpng.io/selector": "app=sorry", "fallback.kpng.io/return-delay": "10s" });

const primary = (endpoints: readonly SliceEndpoint[]) => slice(endpoints, { name: "web-abc" });
/** An active fallback slice as the controller writes it: serving-but-terminating endpoints. */
const active = (endpoints: readonly SliceEndpoint[] = [terminating(FALLBACK)]) =>
  slice(endpoints, {
    name: "web-fallback-1",
    labels: {
      "kubernetes.io/service-name": "web",
      "endpointslice.kubernetes.io/managed-by": "fallback.kpng.io",
      "fallback.kpng.io/active": "true",
    },
  });

function served(service: Service, slices: readonly EndpointSlice[]): string[] {
  const local = computeLocalService(service, slices, THIS_NODE);
  return (local?.ports[0]?.internalEndpoints ?? []).map((e) => endpointString(e));
}

interface Row {
  readonly name: string;
  readonly service: Service | undefined;
  readonly slices: readonly EndpointSlice[];
  /** The slice names handed out at once. */
  readonly inEffect: readonly string[];
}

const rows: Row[] = [
  {
    name: "no fallback slice: the list as it is",
    service: WEB,
    slices: [primary([ep(PRIMARY)])],
    inEffect: ["web-abc"],
  },
  {
    name: "an active fallback and a primary without a ready endpoint: both handed on (the label decides)",
    service: WEB,
    slices: [primary([ep(PRIMARY, { ready: false, serving: false })]), active()],
    inEffect: ["web-abc", "web-fallback-1"],
  },
  {
    name: "an active fallback and a ready primary: both handed on until the return delay ends",
    service: WEB,
    slices: [primary([ep(PRIMARY)]), active()],
    inEffect: ["web-abc", "web-fallback-1"],
  },
  {
    name: "the selector annotation removed: the fallback slices are dropped at once",
    service: svc(),
    slices: [primary([ep(PRIMARY)]), active()],
    inEffect: ["web-abc"],
  },
  {
    name: "an invalid return delay: the fallback slices are dropped at once",
    service: annotated({
      "fallback.kpng.io/selector": "app=sorry",
      "fallback.kpng.io/return-delay": "banana",
    }),
    slices: [primary([]), active()],
    inEffect: ["web-abc"],
  },
  {
    name: "the Service gone: the fallback slices are dropped",
    service: undefined,
    slices: [primary([]), active()],
    inEffect: ["web-abc"],
  },
];

describe("the proxy keeps the return delay itself", () => {
  for (const row of rows) {
    test(row.name, () => {
      const returns = new FallbackReturns(new FakeClock(), () => {});
      const out = returns.filter("ns/web", row.service, row.slices);
      assert.deepEqual(
        out.map((s) => s.metadata.name),
        row.inEffect,
      );
      returns.close();
    });
  }

  test("active fallback endpoints published serving-but-terminating serve as ready in kpng", () => {
    const slices = [primary([ep(PRIMARY, { ready: false, serving: false })]), active()];
    assert.deepEqual(served(WEB, slices), [`${FALLBACK}:8080`]);
    const [fallback] = slicesInEffect(slices);
    assert.deepEqual(fallback?.endpoints[0]?.conditions, { ready: true, serving: true, terminating: false });
  });

  test("an active fallback endpoint that is not serving (its pod is being deleted) is not used", () => {
    const slices = [primary([]), active([ep(FALLBACK, { ready: false, serving: false, terminating: true })])];
    assert.deepEqual(served(WEB, slices), []);
  });

  test("the controller is gone: the primary serves once it has been ready for the return delay", async () => {
    const clock = new FakeClock();
    const expired: string[] = [];
    const returns = new FallbackReturns(clock, (key) => expired.push(key));
    const slices = [primary([ep(PRIMARY)]), active()];
    assert.equal(returns.filter("ns/web", WEB, slices), slices);
    await clock.advance(9_999);
    assert.equal(returns.filter("ns/web", WEB, slices), slices, "still within the delay");
    assert.deepEqual(expired, []);
    await clock.advance(1);
    assert.deepEqual(expired, ["ns/web"]);
    assert.deepEqual(
      returns.filter("ns/web", WEB, slices).map((s) => s.metadata.name),
      ["web-abc"],
    );
    assert.equal(returns.waiting, 0);
  });

  test("a primary that loses its ready endpoints during the delay starts it over", async () => {
    const clock = new FakeClock();
    const returns = new FallbackReturns(clock, () => {});
    const ready = [primary([ep(PRIMARY)]), active()];
    const down = [primary([ep(PRIMARY, { ready: false })]), active()];
    returns.filter("ns/web", WEB, ready);
    await clock.advance(8_000);
    returns.filter("ns/web", WEB, down);
    assert.equal(returns.waiting, 0);
    returns.filter("ns/web", WEB, ready);
    await clock.advance(8_000);
    assert.equal(returns.filter("ns/web", WEB, ready).length, 2, "8 s of a new 10 s delay");
    await clock.advance(2_000);
    assert.equal(returns.filter("ns/web", WEB, ready).length, 1);
  });

  test("in the store: a recompute at the end of the delay moves this node to the primary", async () => {
    const clock = new FakeClock();
    const store = new ClusterStore({ clock });
    for (const o of [node("n1"), WEB, primary([ep(PRIMARY, { ready: false })]), active()]) store.upsert(o);
    const tracker = new LocalStateTracker(store, "n1");
    store.subscribe((c) => tracker.update(c));
    store.synced();
    store.flush();
    const endpoints = () =>
      (tracker.state.services.get("ns/web")?.ports[0]?.internalEndpoints ?? []).map((e) => endpointString(e));
    assert.deepEqual(endpoints(), [`${FALLBACK}:8080`]);

    store.upsert(primary([ep(PRIMARY)]));
    store.flush();
    assert.deepEqual(endpoints(), [`${FALLBACK}:8080`], "the return delay holds, never mixed");
    await clock.advance(10_000);
    store.flush();
    assert.deepEqual(endpoints(), [`${PRIMARY}:8080`]);

    // The primary goes again while the stale label still says active: the fallback serves again.
    store.upsert(primary([ep(PRIMARY, { ready: false })]));
    store.flush();
    assert.deepEqual(endpoints(), [`${FALLBACK}:8080`]);
  });
});
