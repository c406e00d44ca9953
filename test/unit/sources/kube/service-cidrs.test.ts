// The kube source reads the cluster's Service ranges from networking.k8s.io ServiceCIDRs: v1,
// else v1beta1, else none; with the same list/watch guarantees and selector as Services.

import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import type { ServiceCIDR } from "../../../../src/model/kube.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { KubeSource } from "../../../../src/sources/kube/source.ts";
import { serviceCIDR } from "../../../apiserver/fixtures.ts";
import { TestApiServer, type TestApiServerOptions } from "../../../apiserver/server.ts";
import { HookedTransport, RecordingSink, transportTo, waitFor } from "./helpers.ts";

describe("kube source: ServiceCIDRs", () => {
  let api: TestApiServer | undefined;
  let source: KubeSource | undefined;

  afterEach(async () => {
    await source?.stop();
    await api?.close();
  });

  async function start(
    options: TestApiServerOptions = {},
    watchServiceCIDRs = true,
  ): Promise<{ api: TestApiServer; sink: RecordingSink }> {
    api = await TestApiServer.start({ bookmarkIntervalMs: 0, ...options });
    const sink = new RecordingSink();
    source = new KubeSource({
      transport: transportTo(api.url),
      log: silentLogger,
      nodeName: "node-1",
      watchServiceCIDRs,
    });
    return { api, sink };
  }

  const cidrsOf = (sink: RecordingSink, name: string) =>
    (sink.objects.get(`ServiceCIDR ${name}`) as ServiceCIDR | undefined)?.cidrs;

  for (const versions of [["v1"], ["v1beta1"], ["v1", "v1beta1"]] as const) {
    it(`lists and watches them where served as ${versions.join(" and ")}`, async () => {
      const { api, sink } = await start({ serviceCIDRVersions: versions });
      api.create(serviceCIDR("kubernetes", ["198.51.100.0/24", "2001:db8:1::/112"]));
      await source!.start(sink);
      await waitFor("synced", () => sink.syncedCount === 1);
      assert.deepEqual(cidrsOf(sink, "kubernetes"), ["198.51.100.0/24", "2001:db8:1::/112"]);
      api.create(serviceCIDR("wider", ["203.0.113.0/24"]));
      await waitFor("the watched addition", () => sink.has("ServiceCIDR", "wider"));
      api.delete("ServiceCIDR", "kubernetes");
      await waitFor("the watched deletion", () => !sink.has("ServiceCIDR", "kubernetes"));
    });
  }

  it("a failed question is asked again, with backoff, until it is answered", async () => {
    api = await TestApiServer.start({ bookmarkIntervalMs: 0 });
    api.create(serviceCIDR("kubernetes", ["198.51.100.0/24"]));
    const sink = new RecordingSink();
    let failures = 3;
    const asked: string[] = [];
    const transport = new HookedTransport(transportTo(api.url), (pathAndQuery) => {
      if (!pathAndQuery.includes("servicecidrs")) return;
      asked.push(pathAndQuery);
      if (failures-- > 0) throw new Error("connection refused");
    });
    source = new KubeSource({
      transport,
      log: silentLogger,
      nodeName: "node-1",
      timings: { backoff: { initialMs: 10, maxMs: 20, jitter: 0 } },
    });
    await source.start(sink);
    await waitFor("synced", () => sink.syncedCount === 1);
    assert.deepEqual(sink.names("ServiceCIDR"), ["kubernetes"]);
    assert.ok(asked.length >= 4, asked.join("\n"));
  });

  it("a cluster without the API syncs without ranges", async () => {
    const { sink } = await start({ serviceCIDRVersions: [] });
    await source!.start(sink);
    await waitFor("synced", () => sink.syncedCount === 1);
    assert.ok(!sink.calls.some((c) => c.includes("ServiceCIDR")), sink.calls.join("\n"));
  });

  it("with the ranges given, ServiceCIDRs are never asked for", async () => {
    const { api, sink } = await start({}, false);
    api.create(serviceCIDR("kubernetes", ["198.51.100.0/24"]));
    await source!.start(sink);
    await waitFor("synced", () => sink.syncedCount === 1);
    assert.ok(!sink.calls.some((c) => c.includes("ServiceCIDR")));
    assert.equal(api.requests.filter((r) => r.resource === "servicecidrs").length, 0);
  });

  it("an invalid ServiceCIDR is skipped; the others are kept", async () => {
    const { api, sink } = await start();
    api.create(serviceCIDR("bad", ["198.51.100.1/24"]));
    api.create(serviceCIDR("good", ["203.0.113.0/24"]));
    await source!.start(sink);
    await waitFor("synced", () => sink.syncedCount === 1);
    assert.deepEqual(sink.names("ServiceCIDR"), ["good"]);
  });

  it("ServiceCIDRs labelled for another proxy are not asked for", async () => {
    const { api, sink } = await start();
    api.create(
      serviceCIDR("theirs", ["198.51.100.0/24"], { "service.kubernetes.io/service-proxy-name": "other" }),
    );
    api.create(serviceCIDR("ours", ["203.0.113.0/24"]));
    await source!.start(sink);
    await waitFor("synced", () => sink.syncedCount === 1);
    assert.deepEqual(sink.names("ServiceCIDR"), ["ours"]);
  });
});
