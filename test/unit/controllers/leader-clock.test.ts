// Leader election on a fake clock and an in-memory Lease: the renew deadline bounds a renewal
// that hangs, decisions use the monotonic clock only, and a late renewal does not revive a term.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { LeaderElector } from "../../../src/controllers/leader.ts";
import { ApiStatusError } from "../../../src/kube/reflector.ts";
import type { KubeRequest, KubeRequester } from "../../../src/kube/request.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { FakeClock } from "../../support/fake-clock.ts";

const TIMINGS = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

/** One Lease in memory; `hang` makes every request wait until its signal aborts. */
class LeaseServer {
  lease: { metadata: Record<string, unknown>; spec: Record<string, unknown> } | undefined;
  rv = 0;
  hang = false;
  readonly inFlight = new Set<KubeRequest>();

  /** A replica's client; `cut.now` makes its requests fail, as if its network went away. */
  requester(cut = { now: false }): KubeRequester {
    return {
      send: (r) => (cut.now ? Promise.reject(new Error("connection refused")) : this.#send(r)),
    };
  }

  async #send(r: KubeRequest): Promise<unknown> {
    if (this.hang) {
      this.inFlight.add(r);
      return new Promise((_, reject) =>
        r.signal?.addEventListener("abort", () => {
          this.inFlight.delete(r);
          reject(new Error("aborted"));
        }),
      );
    }
    if (r.method === "GET") {
      if (this.lease === undefined) throw new ApiStatusError(404, "NotFound", "no lease");
      return structuredClone(this.lease);
    }
    const body = r.body as { metadata: Record<string, unknown>; spec: Record<string, unknown> };
    if (r.method === "POST" && this.lease !== undefined) throw new ApiStatusError(409, "AlreadyExists", "");
    if (r.method === "PUT" && body.metadata.resourceVersion !== this.lease?.metadata.resourceVersion)
      throw new ApiStatusError(409, "Conflict", "");
    this.lease = { metadata: { ...body.metadata, resourceVersion: String(++this.rv) }, spec: body.spec };
    return this.lease;
  }

  get holder(): string {
    return String(this.lease?.spec.holderIdentity ?? "");
  }
}

function elector(server: LeaseServer, clock: FakeClock, identity: string, wallNow = () => Date.now()) {
  const history: boolean[] = [];
  const cut = { now: false };
  const e = new LeaderElector({
    requester: server.requester(cut),
    namespace: "kube-system",
    name: "kpng-fallback-controller",
    identity,
    log: silentLogger,
    onChange: (leading) => history.push(leading),
    clock,
    wallNow,
    ...TIMINGS,
  });
  return { e, history, cut };
}

describe("leader election timing (fake clock)", () => {
  test("a renewal that hangs ends leadership at the renew deadline and its requests are aborted", async () => {
    const clock = new FakeClock();
    const server = new LeaseServer();
    const a = elector(server, clock, "a");
    a.e.start();
    await clock.advance(0);
    assert.equal(a.e.leading, true);
    await clock.advance(TIMINGS.retryPeriodMs); // one renewal
    server.hang = true;
    await clock.advance(TIMINGS.retryPeriodMs); // the next round hangs
    assert.equal(server.inFlight.size, 1);
    assert.equal(a.e.leading, true);
    // 10 s after the last renewal (which happened 2 s ago): 8 s more, not the request's own 10 s.
    await clock.advance(TIMINGS.renewDeadlineMs - TIMINGS.retryPeriodMs - 1);
    assert.equal(a.e.leading, true);
    await clock.advance(1);
    assert.equal(a.e.leading, false);
    assert.equal(server.inFlight.size, 0, "the hanging request was aborted");
    assert.deepEqual(a.history, [true, false]);
    await a.e.stop();
  });

  test("a follower takes over only after a lease duration without renewal on its monotonic clock", async () => {
    const clock = new FakeClock();
    const server = new LeaseServer();
    const a = elector(server, clock, "a");
    a.e.start();
    await clock.advance(0);
    // b's wall clock runs an hour ahead: its decisions must not care.
    const b = elector(server, clock, "b", () => Date.now() + 3_600_000);
    b.e.start();
    await clock.advance(30_000);
    assert.equal(b.e.leading, false, "a renews: b waits");
    a.cut.now = true; // a vanishes without releasing the Lease
    await clock.advance(TIMINGS.leaseDurationMs - 2 * TIMINGS.retryPeriodMs);
    assert.equal(b.e.leading, false, "not before a lease duration without renewal");
    // It saw a's last renewal up to a retry period late, and looks every retry period.
    await clock.advance(4 * TIMINGS.retryPeriodMs);
    assert.equal(b.e.leading, true);
    assert.equal(server.holder, "b");
    await a.e.stop();
    await b.e.stop();
  });

  test("a leader that lost its term by the deadline acquires anew: leading goes false, then true", async () => {
    const clock = new FakeClock();
    const server = new LeaseServer();
    const a = elector(server, clock, "a");
    a.e.start();
    await clock.advance(0);
    server.hang = true;
    await clock.advance(TIMINGS.renewDeadlineMs);
    assert.equal(a.e.leading, false);
    server.hang = false;
    await clock.advance(TIMINGS.retryPeriodMs);
    assert.equal(a.e.leading, true);
    assert.deepEqual(a.history, [true, false, true], "the controller sees the new term and starts fresh");
    await a.e.stop();
  });
});
