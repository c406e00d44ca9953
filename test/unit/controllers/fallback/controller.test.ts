// The fallback controller against the test API server: what it writes, when, and how it copes
// with conflicts and bad annotations.

import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { FallbackController } from "../../../../src/controllers/fallback/controller.ts";
import { loadKubeConfig } from "../../../../src/kube/kubeconfig.ts";
import { KubeConfigRequester, type KubeRequest, type KubeRequester } from "../../../../src/kube/request.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { endpointSlice, service } from "../../../apiserver/fixtures.ts";
import { TestApiServer } from "../../../apiserver/server.ts";
import type { RawObject } from "../../../apiserver/store.ts";
import { transportTo, waitFor } from "../../sources/kube/helpers.ts";

const NO_ENVIRONMENT = { env: {}, fileExists: () => false, homeDir: "/nonexistent" };

/** Counts what went through, and can run a hook before a request (to race the controller). */
class CountingRequester implements KubeRequester {
  readonly sent: KubeRequest[] = [];
  readonly failed: { request: KubeRequest; status: number }[] = [];
  before: ((r: KubeRequest) => void) | undefined;
  readonly #inner: KubeRequester;
  constructor(inner: KubeRequester) {
    this.#inner = inner;
  }
  async send(r: KubeRequest): Promise<unknown> {
    this.before?.(r);
    this.sent.push(r);
    try {
      return await this.#inner.send(r);
    } catch (err) {
      this.failed.push({ request: r, status: (err as { status?: number }).status ?? 0 });
      throw err;
    }
  }
  writes(): KubeRequest[] {
    return this.sent.filter((r) => r.method !== "GET" && !r.path.endsWith("/events"));
  }
}

function pod(
  name: string,
  ip: string,
  labels: Record<string, string>,
  ready = true,
): RawObject & { kind: string } {
  return {
    kind: "Pod",
    metadata: { name, namespace: "default", labels },
    spec: { nodeName: "node-1", containers: [{ name: "c", ports: [{ name: "http", containerPort: 8080 }] }] },
    status: {
      phase: "Running",
      podIPs: [{ ip }],
      conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
    },
  };
}

function annotated(name: string, annotations: Record<string, string>): RawObject & { kind: string } {
  const s = service(name);
  s.metadata.annotations = annotations;
  return s;
}

type Slice = RawObject & { kind: string; endpoints: { conditions: { ready: boolean; serving: boolean } }[] };

function fallbackSlices(api: TestApiServer, serviceName: string): Slice[] {
  return api.store
    .snapshot("endpointslices", api.store.currentRv)
    .filter(
      (s) =>
        s.metadata.labels?.["endpointslice.kubernetes.io/managed-by"] === "fallback.kpng.io" &&
        s.metadata.labels["kubernetes.io/service-name"] === serviceName,
    ) as Slice[];
}

function activeLabel(api: TestApiServer, serviceName: string): string | undefined {
  const slices = fallbackSlices(api, serviceName);
  return slices.length === 0
    ? undefined
    : slices.map((s) => s.metadata.labels?.["fallback.kpng.io/active"]).join();
}

function events(api: TestApiServer, reason: string): RawObject[] {
  return api.store.snapshot("events", api.store.currentRv).filter((e) => e.reason === reason);
}

describe("fallback controller", () => {
  let api: TestApiServer;
  let requester: CountingRequester;
  let controller: FallbackController;

  beforeEach(async () => {
    api = await TestApiServer.start();
    requester = new CountingRequester(
      new KubeConfigRequester(loadKubeConfig({ master: api.url }, NO_ENVIRONMENT).config),
    );
    controller = new FallbackController({
      transport: transportTo(api.url),
      requester,
      log: silentLogger,
      retryDelayMs: 50,
    });
  });

  afterEach(async () => {
    await controller.stop();
    await api.close();
  });

  async function startLeading(): Promise<void> {
    controller.start();
    controller.setLeading(true);
    await controller.synced;
  }

  // The Service fixture has no selector: its slices are hand-made, and serve as the primary.
  test("switches to the fallback within 1 s of the primary's last ready endpoint going, and back after the return delay", async () => {
    api.create(
      annotated("web", {
        "fallback.kpng.io/selector": "app=sorry",
        "fallback.kpng.io/return-delay": "300ms",
      }),
    );
    api.create(endpointSlice("web-abc", "web", { addresses: ["203.0.113.1"] }));
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
    api.create(pod("other", "203.0.113.51", { app: "other" }));
    await startLeading();

    await waitFor("an inactive fallback slice", () => activeLabel(api, "web") === "false");
    const [inactive] = fallbackSlices(api, "web");
    assert.deepEqual(
      inactive?.endpoints.map((e) => e.conditions),
      [{ ready: false, serving: false, terminating: false }],
    );
    const owners = (inactive!.metadata.ownerReferences ?? []) as { kind: string; name: string }[];
    assert.deepEqual(
      owners.map((o) => `${o.kind}/${o.name}`),
      ["Service/web"],
    );

    const primary = api.get("EndpointSlice", "default/web-abc") as Slice;
    primary.endpoints[0]!.conditions = { ready: false, serving: false };
    api.update(primary);
    const switchMs = await waitFor("activation", () => activeLabel(api, "web") === "true");
    assert.ok(switchMs < 1000, `activated after ${switchMs} ms`);
    assert.deepEqual(
      fallbackSlices(api, "web")[0]?.endpoints.map((e) => e.conditions),
      [{ ready: true, serving: true, terminating: false }],
    );
    await waitFor("the FallbackActivated event", () => events(api, "FallbackActivated").length === 1);

    const readyAgain = api.get("EndpointSlice", "default/web-abc") as Slice;
    readyAgain.endpoints[0]!.conditions = { ready: true, serving: true };
    const back = Date.now();
    api.update(readyAgain);
    await waitFor("deactivation", () => activeLabel(api, "web") === "false");
    assert.ok(Date.now() - back >= 300, "returned before the return delay");
    await waitFor("the FallbackDeactivated event", () => events(api, "FallbackDeactivated").length === 1);
  });

  test("a primary flapping every 100 ms for 3 s: at most 2 switches per return delay; writes counted", async () => {
    api.create(
      annotated("web", { "fallback.kpng.io/selector": "app=sorry", "fallback.kpng.io/return-delay": "1s" }),
    );
    api.create(endpointSlice("web-abc", "web", { addresses: ["203.0.113.1"] }));
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
    await startLeading();
    await waitFor("an inactive fallback slice", () => activeLabel(api, "web") === "false");
    await controller.idle();
    const writesBefore = requester.writes().length;
    const started = Date.now();
    for (let i = 0; i < 30; i++) {
      const primary = api.get("EndpointSlice", "default/web-abc") as Slice;
      const ready = i % 2 === 1;
      primary.endpoints[0]!.conditions = { ready, serving: ready };
      api.update(primary);
      await new Promise((r) => setTimeout(r, 100));
    }
    await waitFor("the return after the flapping stopped", () => activeLabel(api, "web") === "false", 5000);
    const seconds = (Date.now() - started) / 1000;
    await controller.idle();
    const switches = events(api, "FallbackActivated").length + events(api, "FallbackDeactivated").length;
    const writes = requester.writes().length - writesBefore;
    process.stdout.write(
      `# flapping for 3 s (return delay 1 s): ${switches} switches, ${writes} slice writes in ${seconds.toFixed(1)} s\n`,
    );
    assert.ok(switches <= 2 * Math.ceil(seconds / 1), `${switches} switches`);
    assert.equal(switches, 2, "one switch to the fallback, one back after the flapping");
    assert.equal(writes, 2, "one write per switch");
  });

  test("writes only what changed: a pod outside the selector or a resync writes nothing", async () => {
    api.create(annotated("web", { "fallback.kpng.io/selector": "app=sorry" }));
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
    await startLeading();
    await waitFor("the fallback slice", () => activeLabel(api, "web") === "true");
    await controller.idle();
    const before = requester.writes().length;
    api.create(pod("other", "203.0.113.51", { app: "other" }));
    controller.setLeading(true);
    await new Promise((r) => setTimeout(r, 100));
    await controller.idle();
    assert.equal(requester.writes().length, before);
  });

  test("a write that loses a race gets 409 and is retried from the newer object", async () => {
    api.create(annotated("web", { "fallback.kpng.io/selector": "app=sorry" }));
    api.create(endpointSlice("web-abc", "web", { addresses: ["203.0.113.1"] }));
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
    await startLeading();
    await waitFor("an inactive fallback slice", () => activeLabel(api, "web") === "false");
    let raced = false;
    requester.before = (r) => {
      if (raced || r.method !== "PUT") return;
      raced = true;
      const [slice] = fallbackSlices(api, "web");
      slice!.metadata.annotations = { touched: "by someone else" };
      api.update(slice!);
    };
    api.delete("EndpointSlice", "default/web-abc");
    await waitFor("activation despite the conflict", () => activeLabel(api, "web") === "true");
    assert.deepEqual(
      requester.failed.map((f) => f.status),
      [409],
    );
  });

  test("an invalid selector or return delay: a Warning event and nothing else", async () => {
    api.create(annotated("bad-selector", { "fallback.kpng.io/selector": "app in (sorry" }));
    api.create(
      annotated("banana", {
        "fallback.kpng.io/selector": "app=sorry",
        "fallback.kpng.io/return-delay": "banana",
      }),
    );
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
    await startLeading();
    await waitFor("two warnings", () => events(api, "InvalidFallback").length === 2);
    await controller.idle();
    const warnings = events(api, "InvalidFallback") as (RawObject & { type: string; message: string })[];
    assert.deepEqual(
      warnings.map((w) => w.type),
      ["Warning", "Warning"],
    );
    assert.ok(warnings.some((w) => /banana/.test(w.message)));
    assert.equal(requester.writes().filter((w) => w.path.includes("endpointslices")).length, 0);
  });

  test("a selector matching nothing: inactive, no slices; removing the annotation removes the slices", async () => {
    api.create(annotated("nobody", { "fallback.kpng.io/selector": "app=nobody" }));
    api.create(annotated("web", { "fallback.kpng.io/selector": "app=sorry" }));
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
    await startLeading();
    await waitFor("web's fallback", () => activeLabel(api, "web") === "true");
    await controller.idle();
    assert.equal(activeLabel(api, "nobody"), undefined);

    const web = api.get("Service", "default/web")!;
    web.metadata.annotations = {};
    api.update(web as RawObject & { kind: string });
    await waitFor("the slices removed", () => fallbackSlices(api, "web").length === 0);
  });

  test("deleting the Service removes its fallback slices", async () => {
    api.create(annotated("web", { "fallback.kpng.io/selector": "app=sorry" }));
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
    await startLeading();
    await waitFor("web's fallback", () => fallbackSlices(api, "web").length === 1);
    api.delete("Service", "default/web");
    await waitFor("the slices removed", () => fallbackSlices(api, "web").length === 0);
  });

  test("a replica that does not lead writes nothing", async () => {
    api.create(annotated("web", { "fallback.kpng.io/selector": "app=sorry" }));
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
    controller.start();
    await controller.synced;
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(requester.writes().length, 0);
    controller.setLeading(true);
    await waitFor("the new leader's slices", () => fallbackSlices(api, "web").length === 1);
  });
});
