// Safety without the controller, end to end: `kpng kube … to-local to-json` and controller
// processes against the test API server. A dead controller never holds kpng on the fallback past
// the return delay; a restarted one finishes a switch it finds half done; a stock kube-proxy
// reading the same slices (stockView) never has primary and fallback endpoints together; an
// invalid annotation ends the fallback.

import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import type { TestApiServer } from "../../apiserver/server.ts";
import type { RawObject } from "../../apiserver/store.ts";
import { endpointsOf, KpngProcess } from "../kube/kpng-process.ts";
import {
  activeLabels,
  ControllerProcess,
  fallbackSlicesOf,
  LEASE,
  metricsPort,
  report,
  Sampler,
  setPrimaryReady,
  sorryPod,
  startWebCluster,
  stockView,
  until,
} from "./harness.ts";

const PRIMARY = ["203.0.113.5:8080"];
const FALLBACK = ["203.0.113.50:8080"];
const RETURN_DELAY_MS = 2000;
/** Starting kpng on a loaded machine: its first document can take a while. */
const STARTUP_MS = 60_000;

describe("fallback safety without the controller", () => {
  let api: TestApiServer;
  const controllers: ControllerProcess[] = [];
  let proxy: KpngProcess;
  const samplers: Sampler[] = [];

  beforeEach(async () => {
    api = await startWebCluster(`${RETURN_DELAY_MS}ms`);
    proxy = new KpngProcess(["kube", "--master", api.url, "to-local", "to-json", "--node-name", "node-1"]);
  });

  afterEach(async () => {
    for (const s of samplers.splice(0)) s.stop();
    for (const c of controllers.splice(0)) {
      c.kill("SIGTERM");
      await c.exited;
    }
    await proxy.stop();
    await api.close();
  });

  function startController(): ControllerProcess {
    const c = new ControllerProcess(api.url, metricsPort());
    controllers.push(c);
    return c;
  }

  const kpngView = () => (proxy.latest ? endpointsOf(proxy.latest, "default/web").sort() : []);

  /** Samples kpng's and a stock proxy's view until the test ends; returns them. */
  function sample(): { kpng: Sampler; stock: Sampler } {
    const kpng = new Sampler(kpngView);
    const stock = new Sampler(() => stockView(api, "web"));
    samplers.push(kpng, stock);
    return { kpng, stock };
  }

  function assertNeverMixed(views: { kpng: Sampler; stock: Sampler }, fallback = FALLBACK): void {
    for (const [name, sampler] of Object.entries(views)) {
      const mixed = sampler.mixed(PRIMARY, fallback);
      assert.deepEqual(mixed.slice(0, 3), [], `${name} mixed primary and fallback endpoints`);
      assert.ok(sampler.seen.length > 10, `${name} was sampled`);
    }
  }

  async function activate(): Promise<void> {
    await proxy.waitFor("the primary serving", () => kpngView().join() === PRIMARY.join(), STARTUP_MS);
    setPrimaryReady(api, false);
    await proxy.waitFor("the fallback serving", () => kpngView().join() === FALLBACK.join());
    assert.deepEqual(
      stockView(api, "web"),
      FALLBACK,
      "a stock proxy uses the fallback: nothing else is ready",
    );
  }

  it("a dead controller: kpng returns to the primary after the return delay, a stock proxy at once, neither mixes", async () => {
    const controller = startController();
    const views = sample();
    await activate();
    controller.kill("SIGKILL");
    await controller.exited;

    setPrimaryReady(api, true);
    assert.deepEqual(stockView(api, "web"), PRIMARY, "a stock proxy returns as soon as the primary is ready");
    const returnedMs = await proxy.waitFor(
      "kpng back on the primary",
      () => kpngView().join() === PRIMARY.join(),
      RETURN_DELAY_MS + 10_000,
    );
    report(
      `controller dead: kpng back on the primary ${returnedMs} ms after it became ready (delay ${RETURN_DELAY_MS} ms)`,
    );
    assert.ok(returnedMs >= RETURN_DELAY_MS - 100, `returned after ${returnedMs} ms, before the delay`);
    assert.equal(activeLabels(api, "web"), "true", "nobody marked the fallback inactive");
    assertNeverMixed(views);
  });

  it("a live controller: a stock proxy returns at once, kpng after the delay, the slices then inactive, never mixed", async () => {
    startController();
    const views = sample();
    await activate();
    setPrimaryReady(api, true);
    assert.deepEqual(stockView(api, "web"), PRIMARY);
    const returnedMs = await proxy.waitFor(
      "kpng back on the primary",
      () => kpngView().join() === PRIMARY.join(),
    );
    report(`controller alive: kpng back on the primary ${returnedMs} ms after it became ready`);
    assert.ok(returnedMs >= RETURN_DELAY_MS - 100);
    await until("the fallback marked inactive", () => activeLabels(api, "web") === "false");
    assert.deepEqual(stockView(api, "web"), PRIMARY);
    // The primary fails again: both move to the fallback.
    setPrimaryReady(api, false);
    await proxy.waitFor("the fallback again", () => kpngView().join() === FALLBACK.join());
    await until(
      "a stock proxy on the fallback again",
      () => stockView(api, "web").join() === FALLBACK.join(),
    );
    assertNeverMixed(views);
  });

  it("a restarted controller waits out the dead one's lease and finishes a switch it finds half done", async () => {
    // Two fallback slices (the pods serve "http" on different ports).
    const web = api.get("Service", "default/web") as RawObject & { kind: string; spec: { ports: unknown[] } };
    web.spec.ports = [{ name: "http", protocol: "TCP", port: 80, targetPort: "http" }];
    api.update(web);
    api.create(sorryPod("sorry-2", "203.0.113.51", 9090));
    const fallback = [...FALLBACK, "203.0.113.51:9090"];
    const first = startController();
    await proxy.waitFor("the primary serving", () => kpngView().join() === PRIMARY.join(), STARTUP_MS);
    const views = sample();
    setPrimaryReady(api, false);
    await until("both slices active", () => activeLabels(api, "web") === "true,true");
    first.kill("SIGKILL");
    await first.exited;
    // As if the dead replica had been writing a switch back slice by slice: one is inactive.
    const [half] = fallbackSlicesOf(api, "web");
    half!.metadata.labels!["fallback.kpng.io/active"] = "false";
    for (const e of half!.endpoints) e.conditions = { ready: false, serving: false, terminating: false };
    api.update(half!);
    await proxy.waitFor("kpng on the still-active slice only", () => kpngView().length === 1);

    const restartedAt = Date.now();
    startController();
    await until(
      "the restarted controller finishes the switch",
      () => activeLabels(api, "web") === "true,true",
      30_000,
    );
    const tookMs = Date.now() - restartedAt;
    report(
      `restarted controller finished a half-done switch ${tookMs} ms after start (lease ${LEASE.duration} ms)`,
    );
    await proxy.waitFor("kpng on both fallback pods", () => kpngView().join() === fallback.sort().join());
    assertNeverMixed(views, fallback);
  });

  it("an annotation made invalid while active: kpng drops the fallback at once, the controller removes it with a Warning", async () => {
    const controller = startController();
    const views = sample();
    await activate();
    controller.kill("SIGKILL");
    await controller.exited;
    const web = api.get("Service", "default/web")!;
    web.metadata.annotations = { "fallback.kpng.io/selector": "app in (sorry-page" };
    api.update(web as RawObject & { kind: string });
    const droppedMs = await proxy.waitFor("kpng without the fallback", () => kpngView().length === 0);
    report(`invalid annotation, controller dead: kpng dropped the fallback after ${droppedMs} ms`);

    startController();
    await until("the fallback slices removed", () => fallbackSlicesOf(api, "web").length === 0, 15_000);
    await until("a Warning event", () =>
      api.store
        .snapshot("events", api.store.currentRv)
        .some((e) => e.reason === "InvalidFallback" && e.type === "Warning"),
    );
    assert.deepEqual(stockView(api, "web"), []);
    setPrimaryReady(api, true);
    await proxy.waitFor("the primary serving", () => kpngView().join() === PRIMARY.join(), STARTUP_MS);
    assertNeverMixed(views);
  });

  it("uninstall as documented: controller gone, fallback slices deleted by label; both proxies on the primary only", async () => {
    const controller = startController();
    const views = sample();
    await activate();
    // docs/fallback.md, Uninstall: the controller first, so nothing recreates the slices …
    controller.kill("SIGTERM");
    assert.equal(await controller.exited, 0);
    // … then every fallback slice, by its managed-by label (kubectl delete endpointslices -A -l …).
    const selector = encodeURIComponent("endpointslice.kubernetes.io/managed-by=fallback.kpng.io");
    const list = (await (
      await fetch(`${api.url}/apis/discovery.k8s.io/v1/endpointslices?labelSelector=${selector}`)
    ).json()) as {
      items: { metadata: { name: string; namespace: string } }[];
    };
    assert.equal(list.items.length, 1);
    for (const { metadata } of list.items) {
      const res = await fetch(
        `${api.url}/apis/discovery.k8s.io/v1/namespaces/${metadata.namespace}/endpointslices/${metadata.name}`,
        { method: "DELETE" },
      );
      assert.equal(res.status, 200);
    }
    // The primary is still down: the Service rejects, as without a fallback, on both proxies.
    await proxy.waitFor("kpng without the fallback", () => kpngView().length === 0);
    assert.deepEqual(stockView(api, "web"), []);
    setPrimaryReady(api, true);
    await proxy.waitFor("the primary serving", () => kpngView().join() === PRIMARY.join());
    assert.deepEqual(stockView(api, "web"), PRIMARY);
    assert.equal(fallbackSlicesOf(api, "web").length, 0);
    assertNeverMixed(views);
  });
});
