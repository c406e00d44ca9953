// The fallback controller and the proxy end to end, as processes: two controller replicas with
// leader election against the test API server, and `kpng kube … to-local to-json` reading what
// they write. Traffic moves to the fallback pods and back, never mixed, and survives the leader
// being killed.

import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import type { TestApiServer } from "../../apiserver/server.ts";
import { endpointsOf, KpngProcess } from "../kube/kpng-process.ts";
import {
  activeLabels,
  ControllerProcess,
  holder,
  LEASE,
  metricsPort,
  report,
  setPrimaryReady,
  startWebCluster,
  until,
} from "./harness.ts";

const PRIMARY = "203.0.113.5:8080";
const FALLBACK = "203.0.113.50:8080";

describe("kpng fallback-controller with kpng kube", () => {
  let api: TestApiServer;
  const controllers: ControllerProcess[] = [];
  let proxy: KpngProcess | undefined;

  beforeEach(async () => {
    api = await startWebCluster("1s");
  });

  afterEach(async () => {
    for (const c of controllers.splice(0)) {
      c.kill("SIGTERM");
      await c.exited;
    }
    await proxy?.stop();
    proxy = undefined;
    await api.close();
  });

  it("moves traffic to the fallback and back, never mixed, and a second replica takes over from a killed leader", async () => {
    const base = metricsPort();
    const a = new ControllerProcess(api.url, base);
    controllers.push(a);
    await until("a leads", () => holder(api) !== "", 60_000);
    const b = new ControllerProcess(api.url, base + 1);
    controllers.push(b);
    await until(
      "both healthy",
      async () => (await a.get("/healthz")).status === 200 && (await b.get("/healthz")).status === 200,
      60_000,
    );

    proxy = new KpngProcess(["kube", "--master", api.url, "to-local", "to-json", "--node-name", "node-1"]);
    await proxy.waitFor(
      "the primary serving",
      (d) => endpointsOf(d, "default/web").join() === PRIMARY,
      60_000,
    );

    setPrimaryReady(api, false);
    const activatedMs = await proxy.waitFor(
      "the fallback serving",
      (d) => endpointsOf(d, "default/web").join() === FALLBACK,
    );
    report(`fallback serving ${activatedMs} ms after the primary's last ready endpoint went`);
    assert.ok(activatedMs < 2000);
    assert.match(
      (await a.get("/metrics")).text,
      /kpng_fallback_active\{namespace="default",service="web"\} 1/,
    );

    setPrimaryReady(api, true);
    const returnedMs = await proxy.waitFor(
      "the primary serving again",
      (d) => endpointsOf(d, "default/web").join() === PRIMARY,
    );
    report(`primary serving again ${returnedMs} ms after it became ready (return delay 1s)`);
    assert.ok(returnedMs >= 1000, "returned before the return delay");
    // kpng keeps the delay itself; the controller marks the slices inactive at about the same time.
    await until("the fallback marked inactive", () => activeLabels(api, "web") === "false");

    const leader = holder(api);
    a.kill("SIGKILL");
    await a.exited;
    const killedAt = Date.now();
    setPrimaryReady(api, false);
    await proxy.waitFor(
      "the fallback serving under the new leader",
      (d) => endpointsOf(d, "default/web").join() === FALLBACK,
    );
    const tookOverMs = Date.now() - killedAt;
    report(
      `second replica took over and activated ${tookOverMs} ms after the leader was killed (lease ${LEASE.duration} ms)`,
    );
    assert.notEqual(holder(api), leader);
    assert.ok(tookOverMs < LEASE.duration + 1500);

    for (const doc of proxy.docs) {
      const eps = endpointsOf(doc, "default/web");
      assert.ok(!(eps.includes(PRIMARY) && eps.includes(FALLBACK)), `mixed endpoints: ${eps.join()}`);
    }
  });
});
