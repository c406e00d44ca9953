import assert from "node:assert/strict";
import { test } from "node:test";
import { RepeatLimiter } from "../../../src/observability/repeat-limiter.ts";

test("RepeatLimiter logs the 1st, 2nd, 4th, 8th… repeat, after a quiet time, and a new key at once", () => {
  let now = 0;
  const limiter = new RepeatLimiter({ maxQuietMs: 60_000, now: () => now });
  const logged: number[] = [];
  for (let i = 0; i < 10; i++) if (limiter.hit("a").log) logged.push(i + 1);
  assert.deepEqual(logged, [1, 2, 4, 8]);
  now = 60_000;
  assert.deepEqual(limiter.hit("a"), { log: true, count: 11, suppressed: 2 });
  assert.deepEqual(limiter.hit("b"), { log: true, count: 1, suppressed: 0 });
  limiter.reset();
  assert.equal(limiter.hit("b").count, 1);
});
