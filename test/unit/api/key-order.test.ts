// KeyOrder gives a map's values in key order, whether it sorts or reuses an order it remembers.

import assert from "node:assert/strict";
import { test } from "node:test";
import { KeyOrder } from "../../../src/api/key-order.ts";
import { PersistentMap } from "../../../src/model/persistent-map.ts";

const sortedByKey = (entries: [string, number][]) =>
  [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);

const keysOf = (n: number, prefix = "ns/svc-") =>
  Array.from({ length: n }, (_, i) => `${prefix}${(i * 7919) % n}`);

test("values come in ascending key order, for every map in a sequence", () => {
  const order = new KeyOrder();
  const base = keysOf(500);
  const maps: ReadonlyMap<string, number>[] = [
    new Map(base.map((k, i) => [k, i])),
    // Same keys, same iteration order, other values: the remembered order serves.
    new Map(base.map((k, i) => [k, -i])),
    // Same keys in another iteration order.
    new Map([...base].reverse().map((k, i) => [k, i])),
    // A key fewer, a key more.
    new Map(base.slice(1).map((k, i) => [k, i])),
    new Map([...base, "a/first"].map((k, i) => [k, i])),
    // Persistent maps iterate by hash: two built differently still hold the same order.
    PersistentMap.from(base.map((k, i) => [k, i] as const)),
    PersistentMap.from([...base].reverse().map((k, i) => [k, i * 2] as const)),
    new Map(),
    new Map([["only", 1]]),
    // Back to the first key set after several others.
    new Map(base.map((k, i) => [k, i + 1])),
  ];
  for (const [n, map] of maps.entries()) {
    assert.deepEqual(order.sortedValues(map), sortedByKey([...map]), `map ${n}`);
  }
});

test("keys that sort differently from their code units' lengths", () => {
  const order = new KeyOrder();
  const map = new Map([
    ["b/x", 1],
    ["a/y", 2],
    ["a/x", 3],
    ["A/z", 4],
    ["a/x0", 5],
    ["é/x", 6],
  ]);
  assert.deepEqual(order.sortedValues(map), [4, 3, 5, 2, 1, 6]);
  assert.deepEqual(order.sortedValues(map), [4, 3, 5, 2, 1, 6]);
});
