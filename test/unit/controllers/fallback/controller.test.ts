// The fallback controller against the test API server: what it writes, when, and how it copes
// with conflicts and bad annotations.

import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { FallbackController } from "../../../../src/controllers/fallback/controller.ts";
import { loadKubeConfig } from "../../../../src/kube/kubeconfig.ts";
import { ApiStatusError } from "../../../../src/kube/reflector.ts";
import { KubeConfigRequester, type KubeRequest, type KubeRequester } from "../../../../src/kube/request.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { endpointSlice, service } from "../../../apiserver/fixtures.ts";
import { TestApiServer } from "../../../apiserver/server.ts";
import type { RawObject } from "../../../apiserver/store.ts";
import { FakeClock } from "../../../support/fake-clock.ts";
import { settle } from "../../../support/settle.ts";
import { transportTo, waitFor } from "../../sources/kube/helpers.ts";

const NO_ENVIRONMENT = { env: {}, fileExists: () => false, homeDir: "/nonexistent" };

/** Counts what went through, and can run a hook before a request (to race the controller). */
class CountingRequester implements KubeRequester {
  readonly sent: KubeRequest[] = [];
  readonly failed: { request: KubeRequest; status: number }[] = [];
  before: ((r: KubeRequest) => void) | undefined;
  /** An HTTP status to answer instead of the server, or "hang" to never answer (until aborted). */
  answer: ((r: KubeRequest) => number | "hang" | undefined) | undefined;
  readonly #inner: KubeRequester;
  constructor(inner: KubeRequester) {
    this.#inner = inner;
  }
  async send(r: KubeRequest): Promise<unknown> {
    this.before?.(r);
    this.sent.push(r);
    const answer = this.answer?.(r);
    if (answer === "hang") {
      return new Promise((_, reject) =>
        r.signal?.addEventListener("abort", () => reject(new Error("aborted")), { once: true }),
      );
    }
    try {
      if (answer !== undefined) {
        throw new ApiStatusError(answer, answer === 409 ? "Conflict" : "InternalError", "injected");
      }
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
  portName = "http",
): RawObject & { kind: string } {
  return {
    kind: "Pod",
    metadata: { name, namespace: "default", labels },
    spec: {
      nodeName: "node-1",
      containers: [{ name: "c", ports: [{ name: portName, containerPort: 8080 }] }],
    },
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
    controller = newController();
  });

  function newController(clock?: FakeClock): FallbackController {
    return new FallbackController({
      transport: transportTo(api.url),
      requester,
      log: silentLogger,
      retryDelayMs: 50,
      conflictRetryDelayMs: 50,
      ...(clock && { clock }),
    });
  }

  afterEach(async () => {
    await controller.stop();
    await api.close();
  });

  /** Waits until the controller has read every change made so far, and has acted on it. */
  async function caughtUp(): Promise<void> {
    // Its own Events are not watched: the newest watched object is what it must have read.
    const written = Math.max(
      ...["services", "pods", "endpointslices"].flatMap((resource) =>
        api.store.snapshot(resource, api.store.currentRv).map((o) => Number(o.metadata.resourceVersion)),
      ),
    );
    await waitFor("the controller to read the changes", () => controller.seenVersion >= written);
    await settle();
    await controller.idle();
  }

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
      [{ ready: false, serving: true, terminating: true }],
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
    const clock = new FakeClock();
    controller = newController(clock);
    await startLeading();
    await waitFor("an inactive fallback slice", () => activeLabel(api, "web") === "false");
    await controller.idle();
    const writesBefore = requester.writes().length;
    const started = clock.now();
    for (let i = 0; i < 30; i++) {
      setPrimaryReady(i % 2 === 1);
      await caughtUp();
      await clock.advance(100);
    }
    await caughtUp();
    await clock.advance(1000);
    await waitFor("the return after the flapping stopped", () => activeLabel(api, "web") === "false", 5000);
    const seconds = (clock.now() - started) / 1000;
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
    await caughtUp();
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
    await caughtUp();
    assert.equal(requester.writes().length, 0);
    controller.setLeading(true);
    await waitFor("the new leader's slices", () => fallbackSlices(api, "web").length === 1);
  });

  function setPrimaryReady(ready: boolean): void {
    const slice = api.get("EndpointSlice", "default/web-abc") as Slice;
    slice.endpoints[0]!.conditions = { ready, serving: ready };
    api.update(slice);
  }

  async function activeWeb(annotations: Record<string, string> = {}): Promise<void> {
    api.create(annotated("web", { "fallback.kpng.io/selector": "app=sorry", ...annotations }));
    api.create(endpointSlice("web-abc", "web", { addresses: ["203.0.113.1"] }));
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
    await startLeading();
    await waitFor("an inactive fallback slice", () => activeLabel(api, "web") === "false");
    setPrimaryReady(false);
    await waitFor("activation", () => activeLabel(api, "web") === "true");
  }

  test("an annotation made invalid while active ends the fallback, with a Warning and a FallbackDeactivated event", async () => {
    await activeWeb();
    const web = api.get("Service", "default/web")!;
    web.metadata.annotations = { "fallback.kpng.io/selector": "app in (sorry" };
    api.update(web as RawObject & { kind: string });
    await waitFor("the slices removed", () => fallbackSlices(api, "web").length === 0);
    await waitFor("the warning", () => events(api, "InvalidFallback").length === 1);
    await waitFor("the deactivation event", () => events(api, "FallbackDeactivated").length === 1);
  });

  test("headless and ExternalName Services get no fallback slices, and a Warning", async () => {
    const headless = annotated("headless", { "fallback.kpng.io/selector": "app=sorry" });
    (headless.spec as Record<string, unknown>).clusterIP = "None";
    (headless.spec as Record<string, unknown>).clusterIPs = ["None"];
    api.create(headless);
    api.create({
      kind: "Service",
      metadata: {
        name: "external",
        namespace: "default",
        annotations: { "fallback.kpng.io/selector": "app=sorry" },
      },
      spec: { type: "ExternalName", externalName: "example.org" },
    });
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
    await startLeading();
    await waitFor("two warnings", () => events(api, "InvalidFallback").length === 2);
    await controller.idle();
    const messages = events(api, "InvalidFallback").map((e) => String(e.message));
    assert.ok(messages.some((m) => /headless/.test(m)));
    assert.ok(messages.some((m) => /ExternalName/.test(m)));
    assert.equal(requester.writes().filter((w) => w.path.includes("endpointslices")).length, 0);
  });

  test("a fallback whose ready pods serve none of the Service's ports does not activate", async () => {
    const web = annotated("web", { "fallback.kpng.io/selector": "app=sorry" });
    (web.spec as { ports: { targetPort: unknown }[] }).ports[0]!.targetPort = "http";
    api.create(web);
    api.create(endpointSlice("web-abc", "web", { addresses: ["203.0.113.1"] }));
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }, true, "web"));
    await startLeading();
    await waitFor("an inactive fallback slice", () => activeLabel(api, "web") === "false");
    setPrimaryReady(false);
    await caughtUp();
    assert.equal(activeLabel(api, "web"), "false");
    // A pod that has the port makes it activate.
    api.create(pod("sorry-2", "203.0.113.51", { app: "sorry" }));
    await waitFor("activation", () => activeLabel(api, "web") === "true,true");
  });

  test("the activation Event is sent once the slices are written, even when the first write failed", async () => {
    api.create(annotated("web", { "fallback.kpng.io/selector": "app=sorry" }));
    api.create(endpointSlice("web-abc", "web", { addresses: ["203.0.113.1"] }));
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
    await startLeading();
    await waitFor("an inactive fallback slice", () => activeLabel(api, "web") === "false");
    let failures = 2;
    requester.answer = (r) => (r.method === "PUT" && failures-- > 0 ? 500 : undefined);
    setPrimaryReady(false);
    await waitFor("activation", () => activeLabel(api, "web") === "true");
    await waitFor("the FallbackActivated event", () => events(api, "FallbackActivated").length === 1);
    await controller.idle();
    assert.equal(events(api, "FallbackActivated").length, 1);
  });

  test("an Event whose POST fails is retried", async () => {
    let failures = 2;
    requester.answer = (r) => (r.path.endsWith("/events") && failures-- > 0 ? 503 : undefined);
    await activeWeb();
    await waitFor("the FallbackActivated event", () => events(api, "FallbackActivated").length === 1);
  });

  for (const [status, name] of [
    [500, "server errors"],
    [409, "conflicts"],
  ] as const) {
    test(`${name} are retried with a doubling backoff, not in a tight loop`, async () => {
      api.create(annotated("web", { "fallback.kpng.io/selector": "app=sorry" }));
      api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
      requester.answer = (r) =>
        r.path.includes("endpointslices") && r.method !== "GET" ? status : undefined;
      // The retries wait on the controller's clock; the failures are answered without the network.
      const clock = new FakeClock();
      controller = newController(clock);
      const writes = () => requester.sent.filter((r) => r.path.includes("endpointslices")).length;
      await startLeading();
      await waitFor("the first write", () => writes() > 0);
      const attempts = [clock.now()];
      const end = clock.now() + 1000;
      while (clock.now() < end) {
        await clock.advance(5);
        while (attempts.length < writes()) attempts.push(clock.now());
      }
      // 50 ms doubling: 0, 50, 150, 350, 750 ms — 5 in the first second, where 100 ms would give 10.
      assert.ok(attempts.length >= 3 && attempts.length <= 6, `${attempts.length} attempts in 1 s`);
      const gaps = attempts.slice(1).map((t, i) => t - attempts[i]!);
      for (let i = 1; i < gaps.length; i++)
        assert.ok(gaps[i]! >= gaps[i - 1]! * 1.5, `gaps grow: ${gaps.join(", ")}`);
      requester.answer = undefined;
      await clock.advance(60_000);
      await waitFor("written once the server recovers", () => fallbackSlices(api, "web").length === 1, 5000);
    });
  }

  test("a replica that leads again starts from the API, not from what it knew", async () => {
    await activeWeb({ "fallback.kpng.io/return-delay": "200ms" });
    controller.setLeading(false);
    // Meanwhile another leader ended the fallback: the primary is ready, the slices inactive.
    setPrimaryReady(true);
    for (const slice of fallbackSlices(api, "web")) {
      slice.metadata.labels!["fallback.kpng.io/active"] = "false";
      for (const e of slice.endpoints) e.conditions = { ready: false, serving: false };
      api.update(slice);
    }
    await caughtUp();
    const before = requester.writes().length;
    controller.setLeading(true);
    await settle();
    await controller.idle();
    assert.equal(activeLabel(api, "web"), "false", "a stale 'active' state would switch it back");
    assert.equal(requester.writes().length, before, "nothing to write");
  });

  test("losing leadership aborts the writes in flight", async () => {
    api.create(annotated("web", { "fallback.kpng.io/selector": "app=sorry" }));
    api.create(pod("sorry-1", "203.0.113.50", { app: "sorry" }));
    requester.answer = (r) => (r.method === "POST" && r.path.includes("endpointslices") ? "hang" : undefined);
    await startLeading();
    await waitFor("a write in flight", () => requester.sent.some((r) => r.method === "POST"));
    const inFlight = requester.sent.find((r) => r.method === "POST")!;
    assert.equal(inFlight.signal?.aborted, false);
    controller.setLeading(false);
    assert.equal(inFlight.signal?.aborted, true);
    await controller.idle();
    assert.equal(fallbackSlices(api, "web").length, 0);
  });
});
