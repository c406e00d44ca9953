import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setImmediate as nextMacrotask } from "node:timers/promises";
import { ClusterStore } from "../../../src/brain/store.ts";
import type { ClusterChange } from "../../../src/model/global.ts";
import type { KubeObject } from "../../../src/model/kube.ts";
import { ep, node, slice, svc } from "./fixtures.ts";

const PROXY_NAME = "service.kubernetes.io/service-proxy-name";
const HEADLESS = "service.kubernetes.io/headless";
const SERVICE_NAME = "kubernetes.io/service-name";

/** A synced store and the changes it reports, one entry per batch. */
async function syncedStore(objects: readonly KubeObject[], serviceProxyName?: string) {
  const store = new ClusterStore(serviceProxyName === undefined ? {} : { serviceProxyName });
  for (const o of objects) store.upsert(o);
  store.synced();
  const batches: ClusterChange[] = [];
  store.subscribe((c) => batches.push(c));
  await nextMacrotask();
  batches.length = 0;
  return { store, batches };
}

function served(store: ClusterStore): string[] {
  return [...store.services()].map((s) => s.metadata.name).sort();
}

interface LabelRow {
  readonly name: string;
  readonly serviceProxyName?: string;
  readonly objects: readonly KubeObject[];
  readonly services: string[];
  readonly slicesOfWeb: number;
}

const labelRows: LabelRow[] = [
  {
    name: "by default a service with a service-proxy-name label (any value) is ignored",
    objects: [svc(), svc({ name: "other", labels: { [PROXY_NAME]: "" } })],
    services: ["web"],
    slicesOfWeb: 0,
  },
  {
    name: "by default a slice with a service-proxy-name label is ignored",
    objects: [svc(), slice([ep("203.0.113.1")], { labels: { [SERVICE_NAME]: "web", [PROXY_NAME]: "x" } })],
    services: ["web"],
    slicesOfWeb: 0,
  },
  {
    name: "with serviceProxyName only services labelled with it are served",
    serviceProxyName: "mine",
    objects: [
      svc({ name: "web", labels: { [PROXY_NAME]: "mine" } }),
      svc({ name: "theirs", labels: { [PROXY_NAME]: "theirs" } }),
      svc({ name: "plain" }),
    ],
    services: ["web"],
    slicesOfWeb: 0,
  },
  {
    name: "with serviceProxyName only slices labelled with it are served",
    serviceProxyName: "mine",
    objects: [
      svc({ labels: { [PROXY_NAME]: "mine" } }),
      slice([ep("203.0.113.1")], { name: "a", labels: { [SERVICE_NAME]: "web", [PROXY_NAME]: "mine" } }),
      slice([ep("203.0.113.2")], { name: "b" }),
    ],
    services: ["web"],
    slicesOfWeb: 1,
  },
  {
    name: "slices with the headless label are ignored",
    objects: [svc(), slice([ep("203.0.113.1")], { labels: { [SERVICE_NAME]: "web", [HEADLESS]: "" } })],
    services: ["web"],
    slicesOfWeb: 0,
  },
  {
    name: "slices without the service-name label are ignored",
    objects: [svc(), slice([ep("203.0.113.1")], { labels: {} })],
    services: ["web"],
    slicesOfWeb: 0,
  },
  {
    name: "slices are grouped by namespace and service-name label",
    objects: [
      svc(),
      slice([ep("203.0.113.1")], { name: "a" }),
      slice([ep("203.0.113.2")], { name: "b" }),
      slice([ep("203.0.113.3")], { name: "c", namespace: "other" }),
      slice([ep("203.0.113.4")], { name: "d", service: "api" }),
    ],
    services: ["web"],
    slicesOfWeb: 2,
  },
];

describe("ClusterStore label rules", () => {
  for (const row of labelRows) {
    test(row.name, async () => {
      const { store } = await syncedStore(row.objects, row.serviceProxyName);
      assert.deepEqual(served(store), row.services);
      assert.equal(store.slicesOf("ns/web").length, row.slicesOfWeb);
    });
  }

  test("service-proxy-name label added later removes the service", async () => {
    const { store, batches } = await syncedStore([svc()]);
    store.upsert(svc({ labels: { [PROXY_NAME]: "other" }, resourceVersion: "2" }));
    await nextMacrotask();
    assert.deepEqual(served(store), []);
    assert.deepEqual([...(batches[0]?.services ?? [])], ["ns/web"]);
  });

  test("service-proxy-name label removed later adds the service", async () => {
    const { store, batches } = await syncedStore([svc({ labels: { [PROXY_NAME]: "other" } })]);
    assert.deepEqual(served(store), []);
    store.upsert(svc({ resourceVersion: "2" }));
    await nextMacrotask();
    assert.deepEqual(served(store), ["web"]);
    assert.equal(batches.length, 1);
  });

  test("headless label added later removes the slice", async () => {
    const { store, batches } = await syncedStore([svc(), slice([ep("203.0.113.1")])]);
    assert.equal(store.slicesOf("ns/web").length, 1);
    store.upsert(slice([ep("203.0.113.1")], { labels: { [SERVICE_NAME]: "web", [HEADLESS]: "" } }));
    await nextMacrotask();
    assert.equal(store.slicesOf("ns/web").length, 0);
    assert.deepEqual([...(batches[0]?.services ?? [])], ["ns/web"]);
  });

  test("a slice moving to another service changes both", async () => {
    const { store, batches } = await syncedStore([svc(), slice([ep("203.0.113.1")], { name: "s" })]);
    store.upsert(slice([ep("203.0.113.1")], { name: "s", service: "api" }));
    await nextMacrotask();
    assert.deepEqual([...(batches[0]?.services ?? [])].sort(), ["ns/api", "ns/web"]);
    assert.equal(store.slicesOf("ns/web").length, 0);
    assert.equal(store.slicesOf("ns/api").length, 1);
  });
});

describe("ClusterStore change batching", () => {
  test("nothing is reported before sync; the sync batch names every service and node", async () => {
    const store = new ClusterStore();
    const batches: ClusterChange[] = [];
    store.subscribe((c) => batches.push(c));
    store.upsert(svc());
    store.upsert(node("n1"));
    await nextMacrotask();
    assert.equal(batches.length, 0);
    assert.equal(store.isSynced, false);
    store.synced();
    await nextMacrotask();
    assert.equal(store.isSynced, true);
    assert.equal(batches.length, 1);
    assert.deepEqual([...(batches[0]?.services ?? [])], ["ns/web"]);
    assert.deepEqual([...(batches[0]?.nodes ?? [])], ["n1"]);
  });

  test("an empty store still reports its sync once", async () => {
    const store = new ClusterStore();
    const batches: ClusterChange[] = [];
    store.subscribe((c) => batches.push(c));
    store.synced();
    store.synced();
    await nextMacrotask();
    await nextMacrotask();
    assert.equal(batches.length, 1);
    assert.equal(batches[0]?.services.size, 0);
  });

  test("afterFirstLoad runs once, after sync and before the first batch reaches a listener", async () => {
    const events: string[] = [];
    const store = new ClusterStore({ afterFirstLoad: () => events.push("after first load") });
    store.subscribe((c) => events.push(`batch of ${c.services.size}`));
    store.upsert(svc());
    await nextMacrotask();
    assert.deepEqual(events, [], "nothing before sync");
    store.synced();
    await nextMacrotask();
    store.upsert(svc({ name: "later" }));
    await nextMacrotask();
    store.delete("Service", "ns/later");
    await nextMacrotask();
    assert.deepEqual(events, ["after first load", "batch of 1", "batch of 1", "batch of 1"]);
  });

  test("changes in one macrotask arrive as one batch", async () => {
    const { store, batches } = await syncedStore([]);
    store.upsert(svc({ name: "a" }));
    store.upsert(svc({ name: "b" }));
    store.upsert(slice([ep("203.0.113.1")], { service: "c" }));
    store.upsert(node("n2"));
    await nextMacrotask();
    assert.equal(batches.length, 1);
    assert.deepEqual([...(batches[0]?.services ?? [])].sort(), ["ns/a", "ns/b", "ns/c"]);
    assert.deepEqual([...(batches[0]?.nodes ?? [])], ["n2"]);
  });

  test("an identical upsert (same resourceVersion, deep-equal) reports nothing", async () => {
    const { store, batches } = await syncedStore([svc(), slice([ep("203.0.113.1")]), node("n1")]);
    store.upsert(svc());
    store.upsert(slice([ep("203.0.113.1")]));
    store.upsert(node("n1"));
    await nextMacrotask();
    assert.equal(batches.length, 0);
  });

  test("a label-only update is reported (the tracker decides it is irrelevant)", async () => {
    const { store, batches } = await syncedStore([svc()]);
    store.upsert(svc({ labels: { team: "a" }, resourceVersion: "2" }));
    await nextMacrotask();
    assert.equal(batches.length, 1);
  });

  test("delete of an unknown object reports nothing", async () => {
    const { store, batches } = await syncedStore([svc()]);
    store.delete("Service", "ns/nope");
    store.delete("EndpointSlice", "ns/nope");
    store.delete("Node", "nope");
    await nextMacrotask();
    assert.equal(batches.length, 0);
  });

  test("deleting a slice reports its service", async () => {
    const { store, batches } = await syncedStore([svc(), slice([ep("203.0.113.1")], { name: "s" })]);
    store.delete("EndpointSlice", "ns/s");
    await nextMacrotask();
    assert.deepEqual([...(batches[0]?.services ?? [])], ["ns/web"]);
    assert.deepEqual(store.slicesOf("ns/web"), []);
  });

  test("replace with identical objects reports nothing; missing ones are deleted", async () => {
    const { store, batches } = await syncedStore([svc({ name: "a" }), svc({ name: "b" })]);
    store.replace("Service", [svc({ name: "a" }), svc({ name: "b" })]);
    await nextMacrotask();
    assert.equal(batches.length, 0);
    store.replace("Service", [svc({ name: "a" })]);
    await nextMacrotask();
    assert.deepEqual([...(batches[0]?.services ?? [])], ["ns/b"]);
    assert.deepEqual(served(store), ["a"]);
  });

  test("a service's slices as they come and go: one, a second, the first replaced and removed", async () => {
    const { store } = await syncedStore([svc(), slice([ep("10.0.0.1")], { name: "web-a" })]);
    const names = () => store.slicesOf("ns/web").map((s) => s.metadata.name);
    assert.deepEqual(names(), ["web-a"]);
    store.upsert(slice([ep("10.0.0.2")], { name: "web-b" }));
    assert.deepEqual(names(), ["web-a", "web-b"]);
    // A changed slice is taken out and filed again, after the others.
    store.upsert(slice([ep("10.0.0.3")], { name: "web-a", resourceVersion: "2" }));
    assert.deepEqual(names(), ["web-b", "web-a"]);
    assert.equal(store.slicesOf("ns/web")[1]?.endpoints[0]?.addresses[0], "10.0.0.3");
    store.delete("EndpointSlice", "ns/web-a");
    assert.deepEqual(names(), ["web-b"]);
    store.delete("EndpointSlice", "ns/web-b");
    assert.deepEqual(names(), []);
    store.upsert(slice([ep("10.0.0.4")], { name: "web-c" }));
    assert.deepEqual(names(), ["web-c"]);
  });

  test("replace of slices deletes the ones not listed", async () => {
    const { store } = await syncedStore([
      svc(),
      slice([ep("203.0.113.1")], { name: "s1" }),
      slice([ep("203.0.113.2")], { name: "s2" }),
    ]);
    store.replace("EndpointSlice", [slice([ep("203.0.113.2")], { name: "s2" })]);
    assert.deepEqual(
      store.slicesOf("ns/web").map((s) => s.metadata.name),
      ["s2"],
    );
  });

  test("replace files objects under the keys it is given, as under the keys it would make", async () => {
    const objects = [svc({ name: "a" }), svc({ name: "b" })];
    const keys = ["ns/a", "ns/b"];
    const first = new ClusterStore();
    first.replace("Service", objects, keys);
    assert.deepEqual([...first.serviceKeys()], keys);
    assert.equal(first.service("ns/b"), objects[1]);

    const { store, batches } = await syncedStore(objects);
    store.replace("Service", [objects[0] as KubeObject], ["ns/a"]);
    await nextMacrotask();
    assert.deepEqual([...(batches[0]?.services ?? [])], ["ns/b"]);
    assert.deepEqual(served(store), ["a"]);
  });

  test("replaceByKey: a first list goes in as its map, without what the store does not serve; a later one is a replace", async () => {
    const proxied = svc({ name: "c", labels: { "service.kubernetes.io/service-proxy-name": "other" } });
    const objects = [svc({ name: "a" }), svc({ name: "b" }), proxied];
    const byKey = new Map<string, KubeObject>(objects.map((o) => [`ns/${o.metadata.name}`, o]));
    byKey.set("ns/n", node("n"));
    const whole = new ClusterStore();
    whole.replace("Service", objects);
    const adopted = new ClusterStore();
    adopted.replaceByKey("Service", byKey);
    assert.deepEqual([...adopted.serviceKeys()], [...whole.serviceKeys()]);
    assert.deepEqual([...adopted.serviceKeys()], ["ns/a", "ns/b"]);
    const slices = new Map<string, KubeObject>([
      ["ns/s1", slice([ep("203.0.113.1")], { name: "s1", service: "a" })],
      ["ns/s2", slice([ep("203.0.113.2")], { name: "s2", service: "a" })],
    ]);
    adopted.replaceByKey("EndpointSlice", slices);
    assert.deepEqual(
      adopted.slicesOf("ns/a").map((s) => s.metadata.name),
      ["s1", "s2"],
    );
    adopted.synced();
    await nextMacrotask();
    const changes: string[][] = [];
    adopted.subscribe((c) => changes.push([...c.services]));
    adopted.replaceByKey("Service", new Map([["ns/a", objects[0] as KubeObject]]));
    await nextMacrotask();
    assert.deepEqual(served(adopted), ["a"]);
    assert.deepEqual(changes, [["ns/b"]]);
  });

  test("a first list page by page is the same as one replace; a later list is one replace at commit", async () => {
    const objects = [svc({ name: "a" }), svc({ name: "b" }), svc({ name: "c" })];
    const paged = new ClusterStore();
    const list = paged.startList("Service");
    list.add(objects.slice(0, 2));
    assert.deepEqual(served(paged), ["a", "b"], "a first list goes in as its pages arrive");
    list.add(objects.slice(2));
    list.commit();
    const whole = new ClusterStore();
    whole.replace("Service", objects);
    assert.deepEqual(served(paged), served(whole));

    const { store, batches } = await syncedStore(objects);
    const relist = store.startList("Service");
    relist.add([svc({ name: "a" })]);
    assert.deepEqual(served(store), ["a", "b", "c"], "a relist changes nothing before its last page");
    relist.add([svc({ name: "c" })]);
    relist.commit();
    await nextMacrotask();
    assert.deepEqual(served(store), ["a", "c"]);
    assert.deepEqual([...(batches[0]?.services ?? [])], ["ns/b"]);
  });

  test("an unsubscribed listener hears nothing more", async () => {
    const { store } = await syncedStore([]);
    let calls = 0;
    const off = store.subscribe(() => calls++);
    off();
    store.upsert(svc());
    await nextMacrotask();
    assert.equal(calls, 0);
  });

  test("a throwing listener does not stop the others", async () => {
    const { store, batches } = await syncedStore([]);
    store.subscribe(() => {
      throw new Error("boom");
    });
    let later = 0;
    store.subscribe(() => later++);
    store.upsert(svc());
    await nextMacrotask();
    assert.equal(batches.length, 1);
    assert.equal(later, 1);
  });
});
