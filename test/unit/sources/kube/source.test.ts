// The kube source gates synced() on every resource's first list.

import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import { silentLogger } from "../../../../src/observability/log.ts";
import { KubeSource, resourceSpecs } from "../../../../src/sources/kube/source.ts";
import { endpointSlice, node, service } from "../../../apiserver/fixtures.ts";
import { TestApiServer } from "../../../apiserver/server.ts";
import { settle } from "../../../support/settle.ts";
import { RecordingSink, transportTo, waitFor } from "./helpers.ts";

describe("kube source", () => {
  let api: TestApiServer;
  let source: KubeSource;
  let sink: RecordingSink;

  beforeEach(async () => {
    api = await TestApiServer.start({ bookmarkIntervalMs: 0 });
    sink = new RecordingSink();
    source = new KubeSource({ transport: transportTo(api.url), log: silentLogger, nodeName: "node-1" });
  });

  afterEach(async () => {
    await source.stop();
    await api.close();
  });

  it("is synced on an empty cluster, once", async () => {
    await source.start(sink);
    await waitFor("synced", () => sink.syncedCount === 1);
    assert.deepEqual(sink.calls.slice(0, 4).sort(), [
      "replace EndpointSlice []",
      "replace Node []",
      "replace Service []",
      "replace ServiceCIDR []",
    ]);
  });

  it("is not synced while one resource's list is withheld, and is once it arrives", async () => {
    api.create(service("web"));
    api.create(endpointSlice("web-1", "web"));
    api.create(node("node-1"));
    api.withhold("endpointslices");
    await source.start(sink);
    await waitFor("the other lists", () => sink.calls.length === 3);
    await waitFor("the withheld list requested", () =>
      api.requests.some((r) => r.resource === "endpointslices" && !r.watch),
    );
    await settle();
    assert.equal(sink.syncedCount, 0);
    api.withhold("endpointslices", false);
    await waitFor("synced", () => sink.syncedCount === 1);
    assert.equal(sink.calls.at(-1), "synced");
    assert.deepEqual(sink.names("EndpointSlice"), ["default/web-1"]);
  });

  it("stopped before the first list never reports synced", async () => {
    api.withhold("services");
    await source.start(sink);
    await waitFor("the withheld list requested", () => api.requests.some((r) => r.resource === "services"));
    await source.stop();
    api.withhold("services", false);
    await settle();
    assert.equal(sink.syncedCount, 0);
  });
});

describe("resource specs", () => {
  const cases = [
    {
      name: "the default proxy takes unlabelled services and non-headless slices, and its own node",
      scope: { nodeName: "n1" },
      want: [
        ["services", "!service.kubernetes.io/service-proxy-name", undefined],
        [
          "endpointslices",
          "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless",
          undefined,
        ],
        ["nodes", undefined, "metadata.name=n1"],
      ],
    },
    {
      name: "a named proxy takes only services labelled with its name; no node name watches every node",
      scope: { serviceProxyName: "mine" },
      want: [
        ["services", "service.kubernetes.io/service-proxy-name=mine", undefined],
        [
          "endpointslices",
          "service.kubernetes.io/service-proxy-name=mine,!service.kubernetes.io/headless",
          undefined,
        ],
        ["nodes", undefined, undefined],
      ],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(
        resourceSpecs(c.scope).map((s) => [s.resource, s.labelSelector, s.fieldSelector]),
        c.want,
      );
    });
  }
});
