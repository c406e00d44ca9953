// The test API server's writes as the controllers use them: create/update/delete with
// resourceVersion preconditions (409 Conflict), ownerReferences kept, Pods, Leases and Events.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { request } from "../../../apiserver/client.ts";
import { endpointSlice } from "../../../apiserver/fixtures.ts";
import { TestApiServer } from "../../../apiserver/server.ts";

const SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";

describe("test API server writes", () => {
  let api: TestApiServer;
  before(async () => {
    api = await TestApiServer.start();
  });
  after(async () => {
    await api.close();
  });

  test("create, update with the current resourceVersion, then a stale one gets 409 Conflict", async () => {
    const owner = { apiVersion: "v1", kind: "Service", name: "web", uid: "u-web", controller: true };
    const slice = endpointSlice("web-fb", "web");
    (slice.metadata as Record<string, unknown>).ownerReferences = [owner];
    const created = await request(`${api.url}${SLICES}`, { method: "POST", body: slice });
    assert.equal(created.status, 201);
    const rv = created.body.metadata.resourceVersion;
    const stored = api.get("EndpointSlice", "default/web-fb");
    assert.deepEqual(stored?.metadata.ownerReferences, [owner]);

    const update = { ...slice, metadata: { ...slice.metadata, resourceVersion: rv } };
    const updated = await request(`${api.url}${SLICES}/web-fb`, { method: "PUT", body: update });
    assert.equal(updated.status, 200);
    assert.notEqual(updated.body.metadata.resourceVersion, rv);

    const stale = await request(`${api.url}${SLICES}/web-fb`, { method: "PUT", body: update });
    assert.equal(stale.status, 409);
    assert.equal(stale.body.reason, "Conflict");
  });

  test("delete with a stale precondition gets 409; with the current one it deletes", async () => {
    const created = await request(`${api.url}${SLICES}`, {
      method: "POST",
      body: endpointSlice("web-del", "web"),
    });
    const rv = created.body.metadata.resourceVersion;
    const stale = await request(`${api.url}${SLICES}/web-del`, {
      method: "DELETE",
      body: { preconditions: { resourceVersion: "1" } },
    });
    assert.equal(stale.status, 409, JSON.stringify(stale.body));
    const ok = await request(`${api.url}${SLICES}/web-del`, {
      method: "DELETE",
      body: { preconditions: { resourceVersion: rv } },
    });
    assert.equal(ok.status, 200);
    assert.equal(api.get("EndpointSlice", "default/web-del"), undefined);
  });

  test("creating an object that exists is 409 AlreadyExists; with a resourceVersion is 400", async () => {
    await request(`${api.url}${SLICES}`, { method: "POST", body: endpointSlice("web-dup", "web") });
    const again = await request(`${api.url}${SLICES}`, {
      method: "POST",
      body: endpointSlice("web-dup", "web"),
    });
    assert.equal(again.status, 409);
    assert.equal(again.body.reason, "AlreadyExists");
    const withRv = endpointSlice("web-rv", "web");
    withRv.metadata.resourceVersion = "5";
    assert.equal((await request(`${api.url}${SLICES}`, { method: "POST", body: withRv })).status, 400);
  });

  test("Pods, Events and Leases are served under their own groups only", async () => {
    const pod = { metadata: { name: "p" }, spec: {}, status: {} };
    assert.equal(
      (await request(`${api.url}/api/v1/namespaces/ns/pods`, { method: "POST", body: pod })).status,
      201,
    );
    const lease = { metadata: { name: "l" }, spec: { holderIdentity: "a" } };
    const leases = "/apis/coordination.k8s.io/v1/namespaces/ns/leases";
    assert.equal((await request(`${api.url}${leases}`, { method: "POST", body: lease })).status, 201);
    assert.equal((await request(`${api.url}${leases}/l`)).body.kind, "Lease");
    assert.equal((await request(`${api.url}/api/v1/namespaces/ns/leases/l`)).status, 404);
    const event = { metadata: { name: "e" }, reason: "FallbackActivated" };
    assert.equal(
      (await request(`${api.url}/api/v1/namespaces/ns/events`, { method: "POST", body: event })).status,
      201,
    );
    assert.equal((await request(`${api.url}/api/v1/pods`)).body.items.length, 1);
  });
});
