// kube-proxy's clientConnection.qps/burst and configSyncPeriod, against the test API server: a
// relist storm is held to the token bucket's rate, and the periodic resync re-delivers the cache
// without changing a settled local state, while repairing one that lost an object.

import assert from "node:assert/strict";
import { afterEach, describe, test } from "node:test";
import { localStateFeed } from "../../../../src/brain/local-state-feed.ts";
import { ClusterStore } from "../../../../src/brain/store.ts";
import { RateLimitedTransport, TokenBucket } from "../../../../src/kube/rate-limit.ts";
import type { LocalState } from "../../../../src/model/local.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { KubeSource } from "../../../../src/sources/kube/source.ts";
import { endpointSlice, node, service } from "../../../apiserver/fixtures.ts";
import { TestApiServer } from "../../../apiserver/server.ts";
import { FakeClock } from "../../../support/fake-clock.ts";
import { settle } from "../../../support/settle.ts";
import { RecordingSink, transportTo, waitFor } from "./helpers.ts";

/** Retries at once: without a client-side limit, a failing server sees a storm of requests. */
const STORM_TIMINGS = { backoff: { initialMs: 1, maxMs: 1, jitter: 0 } };

describe("kube source: client-side rate limit and resync", () => {
  let api: TestApiServer | undefined;
  let source: KubeSource | undefined;

  afterEach(async () => {
    await source?.stop();
    await api?.close();
    source = undefined;
    api = undefined;
  });

  /** A source of the test API server that re-delivers its cache every minute of `clock`. */
  function resyncingSource(server: TestApiServer, clock: FakeClock): KubeSource {
    return new KubeSource({
      transport: transportTo(server.url),
      log: silentLogger,
      nodeName: "node-1",
      resyncPeriodMs: 60_000,
      clock,
    });
  }

  /** Starts a source whose every list fails, and returns the times of the requests it made. */
  async function storm(qps: number, burst: number, requests: number): Promise<number[]> {
    api = await TestApiServer.start({ bookmarkIntervalMs: 0 });
    api.fail(500);
    const transport = new RateLimitedTransport(transportTo(api.url), new TokenBucket({ qps, burst }));
    source = new KubeSource({ transport, log: silentLogger, nodeName: "node-1", timings: STORM_TIMINGS });
    await source.start(new RecordingSink());
    const server = api;
    await waitFor(`${requests} requests`, () => server.requests.length >= requests, 20_000);
    return server.requests.map((r) => r.at);
  }

  test("a relist storm is held to qps after the burst (qps 10, burst 5)", async () => {
    const at = await storm(10, 5, 35);
    const first = at[0] ?? 0;
    // The server sees a request some time after it took its token (up to hundreds of ms on a
    // loaded machine): the bounds allow half a second of that.
    const slackMs = 500;
    // 5 at once, then 10 per second: the 35th cannot start before 3 s after the first token.
    assert.ok((at[34] ?? 0) - first >= 3000 - slackMs, `35 requests in ${(at[34] ?? 0) - first} ms`);
    for (const start of at) {
      const inTwoSeconds = at.filter((t) => t >= start && t < start + 2000).length;
      const most = 5 + (10 * (2000 + slackMs)) / 1000;
      assert.ok(inTwoSeconds <= most, `${inTwoSeconds} requests in 2 s from ${start - first} ms`);
    }
  });

  test("the same storm without a limit (negative qps) is much faster", async () => {
    const at = await storm(-1, 1, 200);
    assert.ok(at.length >= 200);
  });

  test("every period, each resource's cached objects are handed to the sink again; 0 never", async () => {
    api = await TestApiServer.start({ bookmarkIntervalMs: 0 });
    api.create(service("web"));
    api.create(node("node-1"));
    const clock = new FakeClock();
    const sink = new RecordingSink();
    source = resyncingSource(api, clock);
    await source.start(sink);
    await waitFor("synced", () => sink.syncedCount === 1);
    const replaces = () => sink.calls.filter((c) => c.startsWith("replace")).sort();
    const listed = replaces();
    assert.equal(listed.length, 4);
    await clock.advance(59_999);
    assert.deepEqual(replaces(), listed);
    await clock.advance(1);
    assert.deepEqual(replaces(), [...listed, ...listed].sort());
    assert.ok(sink.calls.includes("replace Service [default/web]"));
    await clock.advance(60_000);
    assert.equal(replaces().length, 12);

    await source.stop();
    const off = new KubeSource({
      transport: transportTo(api.url),
      log: silentLogger,
      clock,
      resyncPeriodMs: 0,
    });
    source = off;
    const quiet = new RecordingSink();
    await off.start(quiet);
    await waitFor("synced", () => quiet.syncedCount === 1);
    assert.equal(clock.pending, 0, "no resync timer");
  });

  test("a resync leaves a settled local state alone (same revision, nothing handed on) and repairs a lost object", async () => {
    api = await TestApiServer.start({ bookmarkIntervalMs: 0 });
    api.create(service("web"));
    api.create(endpointSlice("web-1", "web"));
    api.create(node("node-1"));
    const clock = new FakeClock();
    const store = new ClusterStore({ log: silentLogger });
    source = resyncingSource(api, clock);
    const states: LocalState[] = [];
    const unsubscribe = localStateFeed(store, "node-1").subscribe((s) => {
      states.push(s);
    });
    try {
      await source.start(store);
      await waitFor("the first local state", () => states.at(-1)?.services.has("default/web") === true);
      const settled = states.length;
      const revision = states.at(-1)?.revision;

      await clock.advance(60_000);
      await settle();
      assert.equal(states.length, settled, "no new local state: nothing for a backend to sync");
      assert.equal(states.at(-1)?.revision, revision);

      // An event the store missed (here: it lost the Service); the next resync puts it back.
      store.delete("Service", "default/web");
      await waitFor("the loss seen", () => states.at(-1)?.services.has("default/web") === false);
      await clock.advance(60_000);
      await waitFor("repaired by the resync", () => states.at(-1)?.services.has("default/web") === true);
    } finally {
      unsubscribe();
    }
  });
});
