import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { LeaderElector } from "../../../src/controllers/leader.ts";
import { loadKubeConfig } from "../../../src/kube/kubeconfig.ts";
import { KubeConfigRequester, type KubeRequest, type KubeRequester } from "../../../src/kube/request.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { TestApiServer } from "../../apiserver/server.ts";
import { waitFor } from "../sources/kube/helpers.ts";

const NO_ENVIRONMENT = { env: {}, fileExists: () => false, homeDir: "/nonexistent" };
const TIMINGS = { leaseDurationMs: 1000, renewDeadlineMs: 600, retryPeriodMs: 100 };

/** Stands for a replica whose network went away: every request fails while cut. */
class CuttableRequester implements KubeRequester {
  cut = false;
  /** GETs of the Lease so far: one per round. */
  rounds = 0;
  readonly #inner: KubeRequester;
  constructor(inner: KubeRequester) {
    this.#inner = inner;
  }
  send(r: KubeRequest): Promise<unknown> {
    if (r.method === "GET") this.rounds++;
    return this.cut ? Promise.reject(new Error("connection refused")) : this.#inner.send(r);
  }
}

describe("leader election on a Lease", () => {
  let api: TestApiServer;
  const electors: LeaderElector[] = [];

  beforeEach(async () => {
    api = await TestApiServer.start();
  });
  afterEach(async () => {
    for (const e of electors.splice(0)) await e.stop();
    await api.close();
  });

  function replica(identity: string): {
    elector: LeaderElector;
    requester: CuttableRequester;
    history: boolean[];
  } {
    const requester = new CuttableRequester(
      new KubeConfigRequester(loadKubeConfig({ master: api.url }, NO_ENVIRONMENT).config),
    );
    const history: boolean[] = [];
    const elector = new LeaderElector({
      requester,
      namespace: "kube-system",
      name: "kpng-fallback-controller",
      identity,
      log: silentLogger,
      onChange: (leading) => history.push(leading),
      ...TIMINGS,
    });
    electors.push(elector);
    return { elector, requester, history };
  }

  test("one replica leads; the other takes over within the lease duration after the leader is cut off", async () => {
    const a = replica("a");
    a.elector.start();
    await waitFor("a leads", () => a.elector.leading);
    const b = replica("b");
    b.elector.start();
    // b looks for longer than a lease duration; a's renewals keep the Lease from expiring.
    const rounds = TIMINGS.leaseDurationMs / TIMINGS.retryPeriodMs + 2;
    await waitFor("b watching for over a lease duration", () => b.requester.rounds >= rounds, 20_000);
    assert.equal(b.elector.leading, false, "b must not lead while a renews");
    const lease = api.get("Lease", "kube-system/kpng-fallback-controller") as unknown as {
      spec: { holderIdentity: string };
    };
    assert.equal(lease.spec.holderIdentity, "a");

    a.requester.cut = true;
    const tookMs = await waitFor("b leads", () => b.elector.leading, 3000);
    assert.ok(
      tookMs <= TIMINGS.leaseDurationMs + 2 * TIMINGS.retryPeriodMs + 200,
      `took over after ${tookMs} ms`,
    );
    await waitFor("a stops leading", () => !a.elector.leading, 2000);
    assert.deepEqual(a.history, [true, false]);
  });

  test("a leader that stops gives the Lease up, so the next one need not wait it out", async () => {
    const a = replica("a");
    a.elector.start();
    await waitFor("a leads", () => a.elector.leading);
    await a.elector.stop();
    const b = replica("b");
    b.elector.start();
    const tookMs = await waitFor("b leads", () => b.elector.leading, 3000);
    assert.ok(tookMs < TIMINGS.leaseDurationMs, `took ${tookMs} ms`);
  });
});
