// A two-generation cache keeps at most two generations of entries, and keeps what is still read.

import assert from "node:assert/strict";
import { test } from "node:test";
import { TwoGenerations } from "../../../src/lib/two-generations.ts";

test("a full newer generation becomes the older, and the oldest is dropped", () => {
  const cache = new TwoGenerations<number>(2);
  cache.set("a", 1);
  cache.set("b", 2);
  cache.set("c", 3); // a and b are now the older generation
  assert.equal(cache.get("a"), 1, "read from the older: moves to the newer (c, a)");
  cache.set("d", 4); // newer full: (c, a) become the older, b is dropped
  assert.equal(cache.get("b"), undefined);
  assert.equal(cache.get("c"), 3);
  assert.equal(cache.get("a"), 1);
  assert.equal(cache.get("d"), 4);
});

test("setting a key the newer generation holds replaces it without starting a generation", () => {
  const cache = new TwoGenerations<string>(1);
  cache.set("a", "x");
  cache.set("a", "y");
  assert.equal(cache.get("a"), "y");
  cache.set("b", "z");
  assert.equal(cache.get("a"), "y", "in the older generation");
});
