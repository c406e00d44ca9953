// The test API server must speak the real protocol, or the reflector tests prove nothing.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { request, WatchStream } from "../../../apiserver/client.ts";
import { endpointSlice, node, service } from "../../../apiserver/fixtures.ts";
import { parseFieldSelector, parseLabelSelector } from "../../../apiserver/selectors.ts";
import { TestApiServer } from "../../../apiserver/server.ts";
import { waitFor } from "./helpers.ts";

const SERVICES = "/api/v1/services";

describe("label selectors", () => {
  const cases: { name: string; selector: string; labels: Record<string, string>; matches: boolean }[] = [
    { name: "empty selector matches everything", selector: "", labels: { a: "1" }, matches: true },
    { name: "a=b matches equal value", selector: "a=b", labels: { a: "b" }, matches: true },
    { name: "a=b rejects another value", selector: "a=b", labels: { a: "c" }, matches: false },
    { name: "a==b is a=b", selector: "a==b", labels: { a: "b" }, matches: true },
    { name: "a!=b matches a missing label", selector: "a!=b", labels: {}, matches: true },
    { name: "a!=b rejects equal value", selector: "a!=b", labels: { a: "b" }, matches: false },
    { name: "a matches presence with any value", selector: "a", labels: { a: "" }, matches: true },
    { name: "!a rejects presence", selector: "!a", labels: { a: "x" }, matches: false },
    { name: "!a matches absence", selector: "!a", labels: { b: "x" }, matches: true },
    { name: "in matches a listed value", selector: "a in (x, y)", labels: { a: "y" }, matches: true },
    { name: "in rejects an unlisted value", selector: "a in (x,y)", labels: { a: "z" }, matches: false },
    { name: "notin matches absence", selector: "a notin (x)", labels: {}, matches: true },
    {
      name: "terms are ANDed",
      selector: "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless",
      labels: { "service.kubernetes.io/headless": "" },
      matches: false,
    },
    {
      name: "a set's commas are not term separators",
      selector: "a in (x,y),b=c",
      labels: { a: "x", b: "c" },
      matches: true,
    },
  ];
  for (const c of cases) {
    it(c.name, () => assert.equal(parseLabelSelector(c.selector).matches(c.labels), c.matches));
  }

  it("rejects what it cannot parse", () => {
    assert.throws(() => parseLabelSelector("a in x"), /unable to parse/);
  });

  it("field selector metadata.name= matches the name only", () => {
    const selector = parseFieldSelector("metadata.name=node-1");
    assert.equal(selector.matches({ name: "node-1", namespace: "" }), true);
    assert.equal(selector.matches({ name: "node-2", namespace: "" }), false);
  });
});

describe("test API server protocol", () => {
  let api: TestApiServer;
  before(async () => {
    api = await TestApiServer.start({ bookmarkIntervalMs: 100 });
  });
  after(async () => {
    await api.close();
  });

  it("lists with the list's resourceVersion and per-object resourceVersions", async () => {
    const created = api.create(service("list-a", { namespace: "list" }));
    const { status, body } = await request(`${api.url}/api/v1/namespaces/list/services`);
    assert.equal(status, 200);
    assert.equal(body.kind, "ServiceList");
    assert.equal(body.metadata.resourceVersion, String(api.store.currentRv));
    assert.deepEqual(
      body.items.map((i) => [i.metadata.name, i.metadata.resourceVersion]),
      [["list-a", created.metadata.resourceVersion]],
    );
  });

  it("paginates one consistent snapshot, even when objects change between pages", async () => {
    for (const n of ["p1", "p2", "p3", "p4", "p5"]) api.create(service(n, { namespace: "pages" }));
    const base = `${api.url}/api/v1/namespaces/pages/services?limit=2`;
    const first = await request(base);
    assert.equal(first.body.items.length, 2);
    assert.equal(first.body.metadata.remainingItemCount, 3);
    api.delete("Service", "pages/p4");
    api.create(service("p6", { namespace: "pages" }));
    const names = first.body.items.map((i) => i.metadata.name);
    let token = first.body.metadata.continue;
    while (token) {
      const page = await request(`${base}&continue=${encodeURIComponent(token)}`);
      assert.equal(page.body.metadata.resourceVersion, first.body.metadata.resourceVersion);
      names.push(...page.body.items.map((i) => i.metadata.name));
      token = page.body.metadata.continue;
    }
    assert.deepEqual(names, ["p1", "p2", "p3", "p4", "p5"]);
  });

  it("answers a continue token from before a compaction with 410 Expired", async () => {
    for (const n of ["c1", "c2", "c3"]) api.create(service(n, { namespace: "cont" }));
    const first = await request(`${api.url}/api/v1/namespaces/cont/services?limit=1`);
    api.compact();
    const next = await request(
      `${api.url}/api/v1/namespaces/cont/services?limit=1&continue=${first.body.metadata.continue}`,
    );
    assert.equal(next.status, 410);
    assert.equal(next.body.reason, "Expired");
  });

  it("watch from a resourceVersion sends only later events, in order", async () => {
    const { metadata } = api.create(service("w1", { namespace: "watch" }));
    const watch = new WatchStream(
      `${api.url}/api/v1/namespaces/watch/services?watch=1&resourceVersion=${metadata.resourceVersion}`,
    );
    await watch.opened;
    api.create(service("w2", { namespace: "watch" }));
    api.update(service("w1", { namespace: "watch", port: 81 }));
    api.delete("Service", "watch/w2");
    await watch.until((e) => e.length >= 3);
    watch.close();
    assert.deepEqual(
      watch.events.map((e) => [e.type, e.object.metadata.name]),
      [
        ["ADDED", "w2"],
        ["MODIFIED", "w1"],
        ["DELETED", "w2"],
      ],
    );
    const rvs = watch.events.map((e) => Number(e.object.metadata.resourceVersion));
    assert.deepEqual(
      rvs,
      [...rvs].sort((a, b) => a - b),
    );
  });

  it("watch without a resourceVersion starts with synthetic ADDED events", async () => {
    api.create(service("s1", { namespace: "synthetic" }));
    const watch = new WatchStream(`${api.url}/api/v1/namespaces/synthetic/services?watch=1`);
    await watch.until((e) => e.length >= 1);
    watch.close();
    assert.deepEqual(
      watch.events.map((e) => [e.type, e.object.metadata.name]),
      [["ADDED", "s1"]],
    );
  });

  it("watch from a compacted resourceVersion gets an ERROR 410 event and the stream ends", async () => {
    const old = api.store.currentRv;
    api.create(service("gone", { namespace: "expired" }));
    api.compact();
    const watch = new WatchStream(`${api.url}${SERVICES}?watch=1&resourceVersion=${old}`);
    await watch.until((_e, ended) => ended);
    assert.equal(watch.status, 200);
    assert.equal(watch.events[0]?.type, "ERROR");
    assert.equal(watch.events[0]?.object.code, 410);
  });

  it("an object leaving the label selector is DELETED, and ADDED when it comes back", async () => {
    const selector = encodeURIComponent("!service.kubernetes.io/service-proxy-name");
    api.create(service("sel", { namespace: "selector" }));
    const watch = new WatchStream(
      `${api.url}/api/v1/namespaces/selector/services?watch=1&resourceVersion=${api.store.currentRv}&labelSelector=${selector}`,
    );
    await watch.opened;
    api.update(
      service("sel", { namespace: "selector", labels: { "service.kubernetes.io/service-proxy-name": "x" } }),
    );
    api.update(service("sel", { namespace: "selector", labels: {} }));
    await watch.until((e) => e.length >= 2);
    watch.close();
    assert.deepEqual(
      watch.events.map((e) => e.type),
      ["DELETED", "ADDED"],
    );
  });

  it("the field selector metadata.name= watches one node", async () => {
    api.create(node("node-a"));
    api.create(node("node-b"));
    const { body } = await request(`${api.url}/api/v1/nodes?fieldSelector=metadata.name%3Dnode-b`);
    assert.deepEqual(
      body.items.map((i) => i.metadata.name),
      ["node-b"],
    );
  });

  it("sends bookmarks only when asked, with the current resourceVersion", async () => {
    const requestsBefore = api.requests.length;
    const plain = new WatchStream(`${api.url}/api/v1/nodes?watch=1&resourceVersion=${api.store.currentRv}`);
    const withBookmarks = new WatchStream(
      `${api.url}/api/v1/nodes?watch=1&resourceVersion=${api.store.currentRv}&allowWatchBookmarks=true`,
    );
    const bookmarks = () => withBookmarks.events.filter((x) => x.type === "BOOKMARK").length;
    await waitFor(
      "both watches open",
      () => api.requests.slice(requestsBefore).filter((r) => r.watch).length === 2,
    );
    // Two more bookmark intervals: the plain watch, open by now, would have had one too.
    const seen = bookmarks();
    await withBookmarks.until(() => bookmarks() >= seen + 2);
    plain.close();
    withBookmarks.close();
    assert.equal(plain.events.length, 0);
    const bookmark = withBookmarks.events.find((x) => x.type === "BOOKMARK");
    assert.equal(bookmark?.object.metadata.resourceVersion, String(api.store.currentRv));
  });

  it("closes a watch cleanly after timeoutSeconds", async () => {
    const watch = new WatchStream(
      `${api.url}/api/v1/nodes?watch=1&resourceVersion=${api.store.currentRv}&timeoutSeconds=1`,
    );
    const started = Date.now();
    await watch.until((_e, ended) => ended, 3000);
    assert.ok(Date.now() - started >= 900);
  });

  it("fails the next requests with the injected status, then recovers", async () => {
    api.fail(503, 2);
    assert.equal((await request(`${api.url}${SERVICES}`)).status, 503);
    const second = await request(`${api.url}${SERVICES}`);
    assert.equal(second.status, 503);
    assert.equal(second.body.reason, "ServiceUnavailable");
    assert.equal((await request(`${api.url}${SERVICES}`)).status, 200);
  });

  it("while silent, accepts requests but never answers", async () => {
    api.silence();
    const signal = AbortSignal.timeout(300);
    await assert.rejects(request(`${api.url}${SERVICES}`, { signal }), { name: "AbortError" });
    api.silence(false);
    assert.equal((await request(`${api.url}${SERVICES}`)).status, 200);
  });

  it("accepts POST, PUT and DELETE like the real API server", async () => {
    const url = `${api.url}/apis/discovery.k8s.io/v1/namespaces/http/endpointslices`;
    const created = await request(url, { method: "POST", body: endpointSlice("es", "svc") });
    assert.equal(created.status, 201);
    const updated = await request(`${url}/es`, {
      method: "PUT",
      body: endpointSlice("es", "svc", { addresses: ["203.0.113.9"] }),
    });
    assert.equal(updated.status, 200);
    assert.ok(Number(updated.body.metadata.resourceVersion) > Number(created.body.metadata.resourceVersion));
    assert.equal((await request(`${url}/es`, { method: "DELETE" })).status, 200);
    assert.equal((await request(`${url}/es`)).status, 404);
  });

  it("restarting on the same port while losing state expires older resourceVersions", async () => {
    api.create(service("before-restart", { namespace: "restart" }));
    const rv = api.store.currentRv;
    await api.restart({ keepState: false });
    const list = await request(`${api.url}/api/v1/namespaces/restart/services`);
    assert.deepEqual(list.body.items, []);
    const watch = new WatchStream(`${api.url}${SERVICES}?watch=1&resourceVersion=${rv}`);
    await watch.until((_e, ended) => ended);
    assert.equal(watch.events[0]?.object.code, 410);
  });
});

describe("test API server: expired watches as an HTTP status", () => {
  it("answers a watch from a compacted resourceVersion with HTTP 410", async () => {
    const api = await TestApiServer.start({ expiredWatchAs: "status" });
    try {
      const old = api.store.currentRv;
      api.create(node("n"));
      api.compact();
      const res = await request(`${api.url}/api/v1/nodes?watch=1&resourceVersion=${old}`);
      assert.equal(res.status, 410);
      assert.equal(res.body.reason, "Expired");
    } finally {
      await api.close();
    }
  });
});
