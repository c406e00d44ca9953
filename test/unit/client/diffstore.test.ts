import assert from "node:assert/strict";
import { test } from "node:test";
import { DiffStore } from "../../../src/client/diffstore.ts";

const strings = () =>
  new DiffStore<string, string[]>(
    () => [],
    (v) => v.join("\n"),
  );

function round(store: DiffStore<string, string[]>, values: Record<string, string>) {
  store.reset();
  for (const [k, v] of Object.entries(values)) store.get(k).push(v);
  store.done();
  return {
    changed: store.changed().map((i) => `${i.created ? "C" : "U"} ${i.key}`),
    deleted: store.deleted(),
  };
}

test("a new key is created, an equal rewrite is no change, a different one an update, a missing one a delete", () => {
  const store = strings();
  assert.deepEqual(round(store, { a: "hello a" }), { changed: ["C a"], deleted: [] });
  assert.deepEqual(round(store, { a: "hello a" }), { changed: [], deleted: [] });
  assert.deepEqual(round(store, { a: "hello A", b: "b" }), { changed: ["U a", "C b"], deleted: [] });
  assert.deepEqual(round(store, { b: "b" }), { changed: [], deleted: ["a"] });
  assert.deepEqual(round(store, { b: "b" }), { changed: [], deleted: [] }, "a deleted key is reported once");
  assert.deepEqual(round(store, { a: "hello a", b: "b" }), { changed: ["C a"], deleted: [] });
});

test("reading the difference before done() is an error", () => {
  const store = strings();
  store.get("a");
  assert.throws(() => store.changed(), /done\(\)/);
});
