import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { loadKubeConfig } from "../../../src/kube/kubeconfig.ts";
import { KubeConfigRequester } from "../../../src/kube/request.ts";
import { KubeConfigTransport } from "../../../src/kube/transport.ts";
import { registry } from "../../../src/observability/metrics.ts";
import { TestApiServer } from "../../apiserver/server.ts";

const NO_ENVIRONMENT = { env: {}, fileExists: () => false, homeDir: "/nonexistent" };

interface Sample {
  readonly value: number;
  readonly labels: Record<string, string | number>;
  readonly metricName?: string;
}

async function samples(name: string): Promise<Sample[]> {
  return ((await registry.getMetricsAsJSON()).find((m) => m.name === name)?.values ?? []) as Sample[];
}

async function requests(labels: Record<string, string>): Promise<number> {
  const hit = (await samples("rest_client_requests_total")).find((s) =>
    Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  return hit?.value ?? 0;
}

async function durations(verb: string, host: string): Promise<number> {
  const hit = (await samples("rest_client_request_duration_seconds")).find(
    (s) =>
      s.metricName === "rest_client_request_duration_seconds_count" &&
      s.labels.verb === verb &&
      s.labels.host === host,
  );
  return hit?.value ?? 0;
}

describe("rest_client_* metrics (client-go's names and labels)", () => {
  let api: TestApiServer;
  let host: string;
  before(async () => {
    api = await TestApiServer.start();
    host = new URL(api.url).host;
  });
  after(async () => {
    await api.close();
  });
  const config = () => loadKubeConfig({ master: api.url }, NO_ENVIRONMENT).config;

  test("the reflectors' GETs count by code, method and host, and are timed by verb and host", async () => {
    const transport = new KubeConfigTransport(config());
    const before = await requests({ code: "200", method: "GET", host });
    const timedBefore = await durations("GET", host);
    const res = await transport.get("/api/v1/services", AbortSignal.timeout(5000));
    for await (const _ of res);
    assert.equal(await requests({ code: "200", method: "GET", host }), before + 1);
    assert.equal(await durations("GET", host), timedBefore + 1);
  });

  test("the controllers' requests count their method and status, errors included", async () => {
    const requester = new KubeConfigRequester(config());
    const notFound = await requests({ code: "404", method: "GET", host });
    await assert.rejects(requester.send({ method: "GET", path: "/api/v1/namespaces/x/configmaps/none" }));
    assert.equal(await requests({ code: "404", method: "GET", host }), notFound + 1);

    const created = await requests({ method: "POST", host });
    await requester
      .send({ method: "POST", path: "/api/v1/namespaces/default/events", body: { metadata: { name: "e" } } })
      .catch(() => undefined);
    assert.equal(await requests({ method: "POST", host }), created + 1, "one POST, whatever its status");
  });

  test("a request that never got an answer counts under code <error>", async () => {
    const closed = await TestApiServer.start();
    const url = closed.url;
    await closed.close();
    const deadHost = new URL(url).host;
    const transport = new KubeConfigTransport(loadKubeConfig({ master: url }, NO_ENVIRONMENT).config);
    await assert.rejects(transport.get("/api/v1/services", AbortSignal.timeout(5000)));
    assert.equal(await requests({ code: "<error>", method: "GET", host: deadHost }), 1);
    assert.equal(await durations("GET", deadHost), 1);
  });
});
