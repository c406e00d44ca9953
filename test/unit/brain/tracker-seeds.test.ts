// A new node's first state, seeded from a sibling of its zone, is exactly what computing every
// service for it gives, whatever happened before (pending changes, relabelled or stopped
// siblings); and a feed nobody listens to stops following the store.

import assert from "node:assert/strict";
import { test } from "node:test";
import { computeLocalService } from "../../../src/brain/local-service.ts";
import { localStateFeed } from "../../../src/brain/local-state-feed.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import { trackerSeedsOf } from "../../../src/brain/tracker-seeds.ts";
import type { ClusterChange, ClusterView } from "../../../src/model/global.ts";
import type { LocalState } from "../../../src/model/local.ts";
import { ep, node, slice, svc } from "./fixtures.ts";

const ZONE = "topology.kubernetes.io/zone";
const NODES = 9;
const zoneOf = (n: number) => `z${n % 3}`;

function service(i: number) {
  const kind = i % 4;
  return svc({
    name: `s${i}`,
    clusterIP: `198.51.100.${i + 1}`,
    clusterIPs: [`198.51.100.${i + 1}`],
    internalTrafficPolicy: kind === 1 ? "Local" : "Cluster",
    ...(kind === 2 && { type: "NodePort", externalTrafficPolicy: "Local", ports: [{ nodePort: 30000 + i }] }),
  });
}

/** Service i's endpoints on nodes (i + e·step) % NODES; odd services carry node hints too. */
function endpointsOf(i: number, step = 1) {
  return slice(
    [0, 1, 2].map((e) =>
      ep(`10.0.${i}.${e + 1}`, {
        node: `n${(i + e * step) % NODES}`,
        zone: zoneOf((i + e * step) % NODES),
        ...(i % 2 === 1 && { nodeHints: [`n${(i + 5) % NODES}`] }),
      }),
    ),
    { name: `s${i}-a`, service: `s${i}` },
  );
}

/** Every service computed for this node from scratch. */
function expected(store: ClusterStore, name: string) {
  const labels = store.node(name)?.metadata.labels ?? {};
  const out: [string, unknown][] = [];
  for (const s of store.services()) {
    const key = `${s.metadata.namespace}/${s.metadata.name}`;
    const local = computeLocalService(s, store.slicesOf(key), { name, labels });
    if (local !== undefined) out.push([key, local]);
  }
  return out.sort(([a], [b]) => (a < b ? -1 : 1));
}

const entries = (state: LocalState | undefined) =>
  [...(state?.services ?? [])].sort(([a], [b]) => (a < b ? -1 : 1));

function cluster() {
  const store = new ClusterStore();
  for (let n = 0; n < NODES; n++) store.upsert(node(`n${n}`, { [ZONE]: zoneOf(n) }));
  for (let i = 0; i < 24; i++) {
    store.upsert(service(i));
    store.upsert(endpointsOf(i));
  }
  store.synced();
  store.flush();
  return store;
}

function watch(store: ClusterView, name: string) {
  const watcher = { state: undefined as LocalState | undefined, stop: () => {} };
  watcher.stop = localStateFeed(store, name).subscribe((s) => {
    watcher.state = s;
  });
  return watcher;
}

const settle = () => new Promise((r) => setImmediate(r));

test("seeded states equal states computed from scratch, through changes", async () => {
  const store = cluster();
  const watchers = new Map<string, ReturnType<typeof watch>>();
  const check = async (what: string) => {
    await settle();
    for (const [name, w] of watchers)
      assert.deepEqual(entries(w.state), expected(store, name), `${what}: ${name}`);
  };
  for (let n = 0; n < 6; n++) watchers.set(`n${n}`, watch(store, `n${n}`));
  await check("first nodes");

  // Changes not yet delivered when a node starts from a sibling that has not seen them.
  store.upsert(endpointsOf(3, 4));
  store.upsert(endpointsOf(7, 2));
  store.delete("Service", "ns/s9");
  watchers.set("n6", watch(store, "n6"));
  store.flush();
  await check("pending changes");

  // A sibling moves to another zone; later nodes of its old zone still start right.
  store.upsert(node("n4", { [ZONE]: "z0" }));
  store.flush();
  await check("relabelled");
  watchers.set("n7", watch(store, "n7"));
  await check("after relabel");

  // A stopped node's state is stale after the next change: nobody may start from it.
  watchers.get("n2")!.stop();
  watchers.delete("n2");
  store.upsert(endpointsOf(2, 5));
  store.upsert(endpointsOf(8, 3));
  // n8 is newly named by s10 (its endpoints move to n1, n8, n6).
  store.upsert(endpointsOf(10, 7));
  store.flush();
  watchers.set("n8", watch(store, "n8"));
  await check("after a sibling stopped");
  watchers.set("n2", watch(store, "n2"));
  await check("restarted");
});

test("a seed recomputes only the services that name either node", () => {
  const store = cluster();
  const source = watch(store, "n0");
  const seed = trackerSeedsOf(store).seedFor("n3", "z0");
  assert.ok(seed !== undefined, "n0 is a live node of zone z0");
  const naming = (name: string) =>
    [...store.services()]
      .map((s) => s.metadata.name)
      .filter((s) =>
        store
          .slicesOf(`ns/${s}`)
          .some((sl) => sl.endpoints.some((e) => e.nodeName === name || e.nodeHints.includes(name))),
      )
      .map((s) => `ns/${s}`);
  assert.deepEqual([...seed.recompute].sort(), [...new Set([...naming("n0"), ...naming("n3")])].sort());
  assert.ok(seed.recompute.size < 24, "not every service");
  assert.equal(trackerSeedsOf(store).seedFor("n4", "z1"), undefined, "no node of z1 has a state");
  source.stop();
  // Its state stays current until the store changes (a listener may come back before), then not.
  assert.ok(trackerSeedsOf(store).seedFor("n3", "z0") !== undefined, "current until the next change");
  store.upsert(endpointsOf(2, 5));
  store.flush();
  assert.equal(trackerSeedsOf(store).seedFor("n3", "z0"), undefined, "a stopped node is no seed");
});

/** A ClusterView that counts its open subscriptions. */
class CountingView implements ClusterView {
  readonly inner: ClusterStore;
  open = 0;
  constructor(inner: ClusterStore) {
    this.inner = inner;
  }
  get isSynced() {
    return this.inner.isSynced;
  }
  subscribe(listener: (change: ClusterChange) => void) {
    this.open++;
    const off = this.inner.subscribe(listener);
    return () => {
      this.open--;
      off();
    };
  }
  service(key: string) {
    return this.inner.service(key);
  }
  slicesOf(key: string) {
    return this.inner.slicesOf(key);
  }
  node(name: string) {
    return this.inner.node(name);
  }
  services() {
    return this.inner.services();
  }
  serviceKeys() {
    return this.inner.serviceKeys();
  }
  slices() {
    return this.inner.slices();
  }
  nodes() {
    return this.inner.nodes();
  }
  serviceCIDRObjects() {
    return this.inner.serviceCIDRObjects();
  }
  serviceCIDRs() {
    return this.inner.serviceCIDRs();
  }
}

test("a feed follows the store only while someone listens", async () => {
  const view = new CountingView(cluster());
  const feed = localStateFeed(view, "n1");
  const a = feed.subscribe(() => {});
  const b = feed.subscribe(() => {});
  const following = view.open;
  assert.ok(following >= 1);
  a();
  assert.equal(view.open, following, "one listener is left");
  b();
  b();
  assert.equal(view.open, following, "followed until the store changes (a listener may come back)");
  view.inner.upsert(endpointsOf(2, 5));
  view.inner.flush();
  assert.equal(view.open, following - 1, "the tracker no longer follows the store");
  let state: LocalState | undefined;
  const c = feed.subscribe((s) => {
    state = s;
  });
  await settle();
  assert.deepEqual(entries(state), expected(view.inner, "n1"), "a new listener gets the current state");
  c();
});
