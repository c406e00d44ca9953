import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { RateLimitedRequester, RateLimitedTransport, TokenBucket } from "../../../src/kube/rate-limit.ts";
import type { KubeRequest } from "../../../src/kube/request.ts";
import type { ApiResponse, KubeTransport } from "../../../src/kube/transport.ts";
import { FakeClock } from "../../support/fake-clock.ts";
import { settle } from "../../support/settle.ts";

/** Starts `count` takes at once; returns how many have gone through so far, as time moves. */
function takes(bucket: TokenBucket, count: number, signal?: AbortSignal) {
  let done = 0;
  const all = Array.from({ length: count }, () =>
    bucket.take(signal).then(
      () => {
        done++;
      },
      () => undefined,
    ),
  );
  return { done: () => done, all: Promise.all(all) };
}

describe("the API client's token bucket (clientConnection.qps / burst)", () => {
  test("burst requests go at once, then one every 1/qps seconds", async () => {
    const clock = new FakeClock();
    const t = takes(new TokenBucket({ qps: 5, burst: 3 }, clock), 8);
    await settle();
    assert.equal(t.done(), 3, "the burst");
    await clock.advance(199);
    assert.equal(t.done(), 3);
    await clock.advance(1);
    assert.equal(t.done(), 4, "one more after 200 ms (5 per second)");
    await clock.advance(800);
    assert.equal(t.done(), 8);
    await t.all;
  });

  test("an idle bucket refills up to the burst, never beyond", async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 10, burst: 2 }, clock);
    await takes(bucket, 2).all;
    await clock.advance(60_000);
    const t = takes(bucket, 4);
    await settle();
    assert.equal(t.done(), 2);
    await clock.advance(100);
    assert.equal(t.done(), 3);
  });

  test("a fractional qps: 0.5 means one request every 2 s", async () => {
    const clock = new FakeClock();
    const t = takes(new TokenBucket({ qps: 0.5, burst: 1 }, clock), 2);
    await settle();
    assert.equal(t.done(), 1);
    await clock.advance(1999);
    assert.equal(t.done(), 1);
    await clock.advance(1);
    assert.equal(t.done(), 2);
  });

  test("qps 0 and burst 0 are client-go's defaults (5 and 10); a negative qps is no limit", async () => {
    const clock = new FakeClock();
    const defaults = takes(new TokenBucket({ qps: 0, burst: 0 }, clock), 11);
    await settle();
    assert.equal(defaults.done(), 10);
    await clock.advance(200);
    assert.equal(defaults.done(), 11);
    const unlimited = new TokenBucket({ qps: -1, burst: 1 }, clock);
    assert.equal(unlimited.limited, false);
    const t = takes(unlimited, 1000);
    await settle();
    assert.equal(t.done(), 1000);
    assert.equal(clock.pending, 0, "no timer for an unlimited bucket");
  });

  test("an aborted wait rejects and gives its token back", async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 1, burst: 1 }, clock);
    await bucket.take();
    const abort = new AbortController();
    const waiting = bucket.take(abort.signal);
    abort.abort(new Error("stopped"));
    await assert.rejects(waiting, /stopped/);
    assert.equal(clock.pending, 0, "its timer is gone");
    await clock.advance(1000);
    const t = takes(bucket, 2);
    await settle();
    assert.equal(t.done(), 1, "one token refilled in 1 s, none lost to the aborted wait");
  });

  test("the transport and the requester wait for a token before each request", async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 1, burst: 1 }, clock);
    const started: string[] = [];
    const inner: KubeTransport = {
      get: async (path) => {
        started.push(`GET ${path}`);
        return { statusCode: 200, async *[Symbol.asyncIterator]() {} } as ApiResponse;
      },
    };
    const transport = new RateLimitedTransport(inner, bucket);
    const requester = new RateLimitedRequester(
      {
        send: async (r: KubeRequest) => {
          started.push(`${r.method} ${r.path}`);
          return {};
        },
      },
      bucket,
    );
    const signal = new AbortController().signal;
    void transport.get("/api/v1/services?limit=500", signal);
    void transport.get("/api/v1/services?watch=1", signal);
    void requester.send({ method: "POST", path: "/api/v1/namespaces/default/events" });
    await settle();
    assert.deepEqual(started, ["GET /api/v1/services?limit=500"]);
    await clock.advance(1000);
    assert.equal(started.length, 2);
    await clock.advance(1000);
    assert.deepEqual(started.at(-1), "POST /api/v1/namespaces/default/events");
  });

  // A page that waits for a token waits for the fake clock, which no one moves: the deadline
  // turns that wait into a failure.
  test("a list takes one token, whatever its pages: its continuations go at once", {
    timeout: 5000,
  }, async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 5, burst: 10 }, clock);
    const started: string[] = [];
    const transport = new RateLimitedTransport(
      {
        get: async (path) => {
          started.push(path);
          return { statusCode: 200, async *[Symbol.asyncIterator]() {} } as ApiResponse;
        },
      },
      bucket,
    );
    const signal = new AbortController().signal;
    // 100k EndpointSlices in pages of 500, one after the other, as the reflector reads them.
    await transport.get("/apis/discovery.k8s.io/v1/endpointslices?limit=500", signal);
    for (let page = 1; page < 200; page++)
      await transport.get(`/apis/discovery.k8s.io/v1/endpointslices?limit=500&continue=t${page}`, signal);
    assert.equal(started.length, 200, "no page waited for the clock");
    assert.equal(clock.pending, 0);
    // The list took one token of the burst of 10: nine more requests go at once, the tenth waits.
    const t = takes(bucket, 10);
    await settle();
    assert.equal(t.done(), 9);
    await clock.advance(200);
    assert.equal(t.done(), 10);
  });
});
