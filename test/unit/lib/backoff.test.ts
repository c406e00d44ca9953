import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Backoff } from "../../../src/lib/backoff.ts";

describe("Backoff", () => {
  it("doubles from the initial delay up to the cap", () => {
    const backoff = new Backoff({ initialMs: 500, maxMs: 30_000, jitter: 0 });
    const delays = Array.from({ length: 9 }, () => backoff.next());
    assert.deepEqual(delays, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  });

  it("starts over after a reset", () => {
    const backoff = new Backoff({ initialMs: 100, maxMs: 1000, jitter: 0 });
    backoff.next();
    backoff.next();
    backoff.reset();
    assert.equal(backoff.next(), 100);
  });

  it("jitter takes up to its fraction off the delay", () => {
    const low = new Backoff({ initialMs: 1000, maxMs: 1000, jitter: 0.5, random: () => 1 });
    const high = new Backoff({ initialMs: 1000, maxMs: 1000, jitter: 0.5, random: () => 0 });
    assert.equal(low.next(), 500);
    assert.equal(high.next(), 1000);
  });
});
