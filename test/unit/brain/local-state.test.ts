import assert from "node:assert/strict";
import { describe, mock, test } from "node:test";
import { setImmediate as nextMacrotask } from "node:timers/promises";
import { localStateFeed } from "../../../src/brain/local-state-feed.ts";
import { LocalStateTracker } from "../../../src/brain/local-state-tracker.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import type { ClusterChange, ClusterView } from "../../../src/model/global.ts";
import type { KubeObject } from "../../../src/model/kube.ts";
import type { LocalState } from "../../../src/model/local.ts";
import { pacedFeed } from "../../../src/plugin/paced-feed.ts";
import { gate, settle } from "../../support/settle.ts";
import { ep, node, slice, svc } from "./fixtures.ts";

const ZONE = "topology.kubernetes.io/zone";

/** A synced store, a tracker for n1 fed by it, and a function that applies edits and updates. */
async function tracked(objects: readonly KubeObject[]) {
  const store = new ClusterStore();
  for (const o of objects) store.upsert(o);
  const tracker = new LocalStateTracker(store, "n1");
  store.subscribe((c: ClusterChange) => tracker.update(c));
  store.synced();
  await nextMacrotask();
  const apply = async (edit: (s: ClusterStore) => void): Promise<LocalState> => {
    edit(store);
    await nextMacrotask();
    return tracker.state;
  };
  return { store, tracker, apply };
}

const base: KubeObject[] = [
  node("n1", { [ZONE]: "z1" }),
  node("n2", { [ZONE]: "z2" }),
  svc({ name: "web" }),
  slice([ep("203.0.113.1", { node: "n1" }), ep("203.0.113.2")], { service: "web" }),
  svc({
    name: "itp",
    internalTrafficPolicy: "Local",
    clusterIP: "198.51.100.11",
    clusterIPs: ["198.51.100.11"],
  }),
  slice([ep("203.0.113.3", { node: "n1" }), ep("203.0.113.4", { node: "n2" })], { service: "itp" }),
];

interface RevisionRow {
  readonly name: string;
  readonly edit: (s: ClusterStore) => void;
  /** How much the revision moves: 0 (irrelevant) or 1 (relevant). */
  readonly bump: 0 | 1;
  /** Services whose object must be kept (identity) after the edit. */
  readonly kept: string[];
}

const revisionRows: RevisionRow[] = [
  {
    name: "label-only service update: revision unchanged",
    edit: (s) => s.upsert(svc({ name: "web", labels: { team: "a" }, resourceVersion: "2" })),
    bump: 0,
    kept: ["ns/web", "ns/itp"],
  },
  {
    name: "annotation-only slice update: revision unchanged",
    edit: (s) => {
      const sl = slice([ep("203.0.113.1", { node: "n1" }), ep("203.0.113.2")], {
        service: "web",
        resourceVersion: "2",
      });
      s.upsert({ ...sl, metadata: { ...sl.metadata, annotations: { note: "x" } } });
    },
    bump: 0,
    kept: ["ns/web", "ns/itp"],
  },
  {
    name: "resync of identical objects: revision unchanged",
    edit: (s) => {
      for (const kind of ["Node", "Service", "EndpointSlice"] as const)
        s.replace(
          kind,
          base.filter((o) => o.kind === kind),
        );
    },
    bump: 0,
    kept: ["ns/web", "ns/itp"],
  },
  {
    name: "another node's endpoint in an iTP Local service without external access: revision unchanged",
    edit: (s) =>
      s.upsert(
        slice(
          [
            ep("203.0.113.3", { node: "n1" }),
            ep("203.0.113.4", { node: "n2" }),
            ep("203.0.113.5", { node: "n3" }),
          ],
          {
            service: "itp",
            resourceVersion: "2",
          },
        ),
      ),
    bump: 0,
    kept: ["ns/web", "ns/itp"],
  },
  {
    name: "an unrelated node's labels change: revision unchanged",
    edit: (s) => s.upsert(node("n2", { [ZONE]: "z9" })),
    bump: 0,
    kept: ["ns/web", "ns/itp"],
  },
  {
    name: "this node's unrelated label change: revision unchanged",
    edit: (s) => s.upsert(node("n1", { [ZONE]: "z1", role: "edge" })),
    bump: 0,
    kept: ["ns/web", "ns/itp"],
  },
  {
    name: "a service labelled for another proxy that stays unserved: revision unchanged",
    edit: (s) => s.upsert(svc({ name: "alt", labels: { "service.kubernetes.io/service-proxy-name": "x" } })),
    bump: 0,
    kept: ["ns/web", "ns/itp"],
  },
  {
    name: "a headless service added: revision unchanged",
    edit: (s) => s.upsert(svc({ name: "hl", clusterIP: "None", clusterIPs: ["None"] })),
    bump: 0,
    kept: ["ns/web", "ns/itp"],
  },
  {
    name: "another node's endpoint in a Cluster-policy service: revision +1, other service kept",
    edit: (s) =>
      s.upsert(
        slice([ep("203.0.113.1", { node: "n1" }), ep("203.0.113.2"), ep("203.0.113.9", { node: "n3" })], {
          service: "web",
          resourceVersion: "2",
        }),
      ),
    bump: 1,
    kept: ["ns/itp"],
  },
  {
    name: "a local endpoint of an iTP Local service turns terminating: revision +1",
    edit: (s) =>
      s.upsert(
        slice(
          [
            ep("203.0.113.3", { node: "n1", ready: false, terminating: true }),
            ep("203.0.113.4", { node: "n2" }),
          ],
          {
            service: "itp",
            resourceVersion: "2",
          },
        ),
      ),
    bump: 1,
    kept: ["ns/web"],
  },
  {
    name: "a service added: revision +1",
    edit: (s) => s.upsert(svc({ name: "new", clusterIP: "198.51.100.12", clusterIPs: ["198.51.100.12"] })),
    bump: 1,
    kept: ["ns/web", "ns/itp"],
  },
  {
    name: "a service deleted: revision +1",
    edit: (s) => s.delete("Service", "ns/web"),
    bump: 1,
    kept: ["ns/itp"],
  },
  {
    name: "service-proxy-name label added to a served service: revision +1",
    edit: (s) => s.upsert(svc({ name: "web", labels: { "service.kubernetes.io/service-proxy-name": "x" } })),
    bump: 1,
    kept: ["ns/itp"],
  },
  {
    name: "this node's zone label changes: everything recomputed, revision +1 only if results differ",
    edit: (s) => s.upsert(node("n1", { [ZONE]: "z2" })),
    bump: 0,
    kept: ["ns/web", "ns/itp"],
  },
];

describe("LocalStateTracker revisions", () => {
  for (const row of revisionRows) {
    test(row.name, async () => {
      const { tracker, apply } = await tracked(base);
      const before = tracker.state;
      const after = await apply(row.edit);
      assert.equal(after.revision, before.revision + row.bump);
      if (row.bump === 0) assert.equal(after, before, "the same state object is returned");
      for (const key of row.kept)
        assert.equal(after.services.get(key), before.services.get(key), `${key} kept`);
    });
  }

  test("the first computation gives revision 1 with every served service", async () => {
    const { tracker } = await tracked(base);
    assert.equal(tracker.state.revision, 1);
    assert.equal(tracker.state.node, "n1");
    assert.deepEqual([...tracker.state.services.keys()].sort(), ["ns/itp", "ns/web"]);
  });

  test("an empty cluster stays at revision 0", async () => {
    const { tracker } = await tracked([]);
    assert.equal(tracker.state.revision, 0);
    assert.equal(tracker.state.services.size, 0);
  });

  test("zone label change that moves topology recomputes without the service being named", async () => {
    const hinted = slice(
      [ep("203.0.113.1", { zoneHints: ["z1"] }), ep("203.0.113.2", { zoneHints: ["z2"] })],
      { service: "web" },
    );
    const { tracker, apply } = await tracked([node("n1", { [ZONE]: "z1" }), svc(), hinted]);
    const ips = (s: LocalState) => s.services.get("ns/web")?.ports[0]?.internalEndpoints.map((e) => e.ip);
    assert.deepEqual(ips(tracker.state), ["203.0.113.1"]);
    const after = await apply((s) => s.upsert(node("n1", { [ZONE]: "z2" })));
    assert.equal(after.revision, 2);
    assert.deepEqual(ips(after), ["203.0.113.2"]);
  });

  test("this node's Node object deleted: zone gone, topology off", async () => {
    const hinted = slice(
      [ep("203.0.113.1", { zoneHints: ["z1"] }), ep("203.0.113.2", { zoneHints: ["z2"] })],
      { service: "web" },
    );
    const { apply } = await tracked([node("n1", { [ZONE]: "z1" }), svc(), hinted]);
    const after = await apply((s) => s.delete("Node", "n1"));
    assert.equal(after.services.get("ns/web")?.ports[0]?.internalEndpoints.length, 2);
  });

  test("a change of this node's Node other than its zone computes no service again", async () => {
    const store = new ClusterStore();
    for (const o of base) store.upsert(o);
    const { view, computed } = countingComputations(store);
    const tracker = new LocalStateTracker(view, "n1");
    store.subscribe((c: ClusterChange) => tracker.update(c));
    store.synced();
    await nextMacrotask();
    assert.equal(computed(), 2);
    const state = tracker.state;
    store.upsert({
      ...node("n1", { [ZONE]: "z1", role: "edge" }),
      addresses: [{ type: "InternalIP", address: "192.0.2.1" }],
    });
    await nextMacrotask();
    assert.equal(computed(), 2, "no service computed again");
    assert.deepEqual(tracker.state.nodeIPs, ["192.0.2.1"]);
    assert.equal(tracker.state.services, state.services);
    store.upsert(node("n1", { [ZONE]: "z2" }));
    await nextMacrotask();
    assert.equal(computed(), 4, "a new zone computes every service");
  });

  test("trackers of several nodes share the services their nodes see alike; a tracker alone computes its own", async () => {
    const store = new ClusterStore();
    for (const o of [
      node("n1", { [ZONE]: "z1" }),
      node("n2", { [ZONE]: "z2" }),
      node("n3", { [ZONE]: "z2" }),
      svc({ name: "web" }),
      slice([ep("203.0.113.1", { node: "n9" }), ep("203.0.113.2", { node: "n9" })], { service: "web" }),
    ])
      store.upsert(o);
    store.synced();
    await nextMacrotask();
    const web = (tracker: LocalStateTracker) => {
      tracker.update({ services: new Set(), nodes: new Set([tracker.nodeName]), serviceCIDRs: true });
      return tracker.state.services.get("ns/web");
    };
    const first = web(new LocalStateTracker(store, "n1"));
    assert.equal(
      web(new LocalStateTracker(store, "n3")),
      first,
      "another zone that sees it alike: one object",
    );
    const alone = web(new LocalStateTracker(store, "n2", { alone: true }));
    assert.notEqual(alone, first);
    assert.deepEqual(alone, first);
  });

  test("update() with an empty change returns the same state", async () => {
    const { tracker } = await tracked(base);
    const state = tracker.state;
    assert.equal(tracker.update({ services: new Set(), nodes: new Set(), serviceCIDRs: false }), state);
  });
});

/** The store as trackers see it, and how many services they have computed from it. */
function countingComputations(store: ClusterStore): { view: ClusterView; computed: () => number } {
  let computed = 0;
  const countedSlicesOf = (key: string) => {
    computed++;
    return store.slicesOf(key);
  };
  const view = new Proxy<ClusterView>(store, {
    get: (target, name) => {
      if (name === "slicesOf") return countedSlicesOf;
      const value = Reflect.get(target, name, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { view, computed: () => computed };
}

describe("localStateFeed", () => {
  /** A feed for n1 over a synced store of `base`, counting the services its trackers compute. */
  async function countedFeed() {
    const store = new ClusterStore();
    for (const o of base) store.upsert(o);
    store.synced();
    await nextMacrotask();
    const { view, computed } = countingComputations(store);
    return { store, feed: localStateFeed(view, "n1"), computed };
  }

  test("a listener that comes after the last one left, before the store changes, takes the state as it is", async () => {
    const { feed, computed } = await countedFeed();
    const first: LocalState[] = [];
    const off = feed.subscribe((s) => {
      first.push(s);
    });
    await settle();
    assert.equal(computed(), 2);
    off();
    const second: LocalState[] = [];
    feed.subscribe((s) => {
      second.push(s);
    });
    await settle();
    assert.equal(computed(), 2, "nothing computed again");
    assert.equal(second[0], first[0]);
  });

  test("with nobody listening, the feed stops at the store's next change without computing it", async () => {
    const { store, feed, computed } = await countedFeed();
    const off = feed.subscribe(() => {});
    await settle();
    off();
    store.upsert(svc({ name: "late", clusterIP: "198.51.100.40", clusterIPs: ["198.51.100.40"] }));
    await settle();
    assert.equal(computed(), 2, "the change is not computed");
    const seen: LocalState[] = [];
    feed.subscribe((s) => {
      seen.push(s);
    });
    await settle();
    assert.equal(computed(), 5, "a new listener starts from the store: every service");
    assert.deepEqual([...(seen[0]?.services.keys() ?? [])].sort(), ["ns/itp", "ns/late", "ns/web"]);
  });

  test("first emission after sync even when empty", async () => {
    const store = new ClusterStore();
    const seen: LocalState[] = [];
    localStateFeed(store, "n1").subscribe((s) => {
      seen.push(s);
    });
    await nextMacrotask();
    assert.equal(seen.length, 0, "nothing before sync");
    store.synced();
    await settle();
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.services.size, 0);
  });

  test("a listener subscribing after sync gets the complete state at once", async () => {
    const store = new ClusterStore();
    store.upsert(svc());
    store.synced();
    await nextMacrotask();
    const seen: LocalState[] = [];
    localStateFeed(store, "n1").subscribe((s) => {
      seen.push(s);
    });
    await settle();
    assert.equal(seen.length, 1);
    assert.deepEqual([...(seen[0]?.services.keys() ?? [])], ["ns/web"]);
  });

  test("irrelevant changes emit nothing; relevant ones emit the next revision", async () => {
    const store = new ClusterStore();
    store.synced();
    const seen: number[] = [];
    localStateFeed(store, "n1").subscribe((s) => {
      seen.push(s.revision);
    });
    await settle();
    store.upsert(svc({ name: "hl", clusterIP: "None", clusterIPs: ["None"] }));
    await settle();
    store.upsert(svc());
    await settle();
    assert.deepEqual(seen, [0, 1]);
  });

  test("never concurrent: states arriving during a slow delivery are coalesced to the latest", async () => {
    const store = new ClusterStore();
    store.synced();
    const seen: number[] = [];
    let active = 0;
    let maxActive = 0;
    const slow = [gate(), gate()];
    localStateFeed(store, "n1").subscribe(async (s) => {
      active++;
      maxActive = Math.max(maxActive, active);
      seen.push(s.revision);
      await slow[seen.length - 1]?.promise;
      active--;
    });
    await settle();
    for (let i = 0; i < 5; i++) {
      store.upsert(
        svc({ name: `s${i}`, clusterIP: `198.51.100.${20 + i}`, clusterIPs: [`198.51.100.${20 + i}`] }),
      );
      await nextMacrotask();
    }
    await settle();
    assert.deepEqual(seen, [0], "the first delivery is still running");
    slow[0]?.open();
    await settle();
    slow[1]?.open();
    await settle();
    assert.equal(maxActive, 1);
    assert.deepEqual(seen, [0, 5]);
  });

  test("pacedFeed spaces deliveries and delivers the latest state", async (t) => {
    const store = new ClusterStore();
    store.synced();
    // A fake monotonic clock, advanced together with the mocked setTimeout.
    let now = 1000;
    mock.timers.enable({ apis: ["setTimeout"] });
    t.after(() => mock.timers.reset());
    const advance = (ms: number) => {
      now += ms;
      mock.timers.tick(ms);
    };
    const times: number[] = [];
    const seen: number[] = [];
    pacedFeed(localStateFeed(store, "n1"), 80, undefined, () => now).subscribe((s) => {
      times.push(now);
      seen.push(s.revision);
    });
    await settle();
    store.upsert(svc({ name: "a", clusterIP: "198.51.100.30", clusterIPs: ["198.51.100.30"] }));
    await nextMacrotask();
    store.upsert(svc({ name: "b", clusterIP: "198.51.100.31", clusterIPs: ["198.51.100.31"] }));
    await settle();
    advance(79);
    await settle();
    assert.deepEqual(seen, [0], "nothing before the period has passed");
    advance(1);
    await settle();
    assert.deepEqual(seen, [0, 2], "then the latest state, once");
    assert.deepEqual(times, [1000, 1080]);
  });

  test("a failing listener keeps receiving later states", async () => {
    const store = new ClusterStore();
    store.synced();
    const seen: number[] = [];
    localStateFeed(store, "n1").subscribe((s) => {
      seen.push(s.revision);
      throw new Error("sink failed");
    });
    await settle();
    store.upsert(svc());
    await settle();
    assert.deepEqual(seen, [0, 1]);
  });

  test("unsubscribe stops deliveries", async () => {
    const store = new ClusterStore();
    store.synced();
    const seen: number[] = [];
    const off = localStateFeed(store, "n1").subscribe((s) => {
      seen.push(s.revision);
    });
    await settle();
    off();
    store.upsert(svc());
    await settle();
    assert.deepEqual(seen, [0]);
  });
});
