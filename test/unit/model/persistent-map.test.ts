import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PersistentMap } from "../../../src/model/persistent-map.ts";
import { seeded } from "../../support/seeded.ts";

const sorted = (m: ReadonlyMap<string, number>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : 1));

describe("PersistentMap", () => {
  it("gives its keys and values as columns in its iteration order", () => {
    const random = seeded(7);
    let map = PersistentMap.empty<number>();
    for (let i = 0; i < 5000; i++) map = map.set(`k${Math.floor(random() * 3000)}`, i);
    const { keys, values } = map.columns();
    assert.deepEqual(keys, [...map.keys()]);
    assert.deepEqual(values, [...map.values()]);
    assert.equal(keys.length, map.size);
    assert.deepEqual(PersistentMap.empty<number>().columns(), { keys: [], values: [] });
  });

  it("behaves like a Map over random sets and deletes, through both the editor and single edits", () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const random = seeded(seed);
      const reference = new Map<string, number>();
      let map = PersistentMap.empty<number>();
      const versions: [PersistentMap<number>, [string, number][]][] = [];
      for (let round = 0; round < 60; round++) {
        const editor = random() < 0.5 ? map.edit() : undefined;
        for (let i = 0; i < 80; i++) {
          // A small key space makes deletes and overwrites frequent.
          const key = `ns-${Math.floor(random() * 400)}/svc`;
          if (random() < 0.35) {
            reference.delete(key);
            if (editor) editor.delete(key);
            else map = map.delete(key);
          } else {
            const value = Math.floor(random() * 5);
            reference.set(key, value);
            if (editor) editor.set(key, value);
            else map = map.set(key, value);
          }
        }
        if (editor) map = editor.done();
        assert.equal(map.size, reference.size);
        assert.deepEqual(sorted(map), sorted(reference));
        for (const key of reference.keys()) assert.equal(map.get(key), reference.get(key));
        assert.equal(map.has("absent"), false);
        versions.push([map, sorted(reference)]);
      }
      // Older versions never change when newer ones are made from them.
      for (const [old, expected] of versions) assert.deepEqual(sorted(old), expected);
    }
  });

  it("keeps keys whose 32-bit hashes are equal apart, and removes them one by one", () => {
    // Found by search: each pair has one FNV-1a hash.
    const colliding: [string, string][] = [
      ["ns/s232789", "ns/s429192"],
      ["ns/s232788", "ns/s429193"],
      ["ns/s232783", "ns/s429198"],
    ];
    const editor = PersistentMap.empty<number>().edit();
    for (let i = 0; i < 5000; i++) editor.set(`k${i}`, i);
    for (const [i, key] of colliding.flat().entries()) editor.set(key, -i);
    let map = editor.done();
    assert.equal(map.size, 5006);
    for (const [i, key] of colliding.flat().entries()) assert.equal(map.get(key), -i);
    map = map.delete("ns/s232789").set("ns/s429192", 42);
    assert.equal(map.has("ns/s232789"), false);
    assert.equal(map.get("ns/s429192"), 42);
    map = map.delete("ns/s429192");
    assert.equal(map.size, 5004);
    for (const [a, b] of colliding.slice(1)) map = map.delete(b).delete(a);
    assert.equal(map.size, 5000);
    for (let i = 0; i < 5000; i++) assert.equal(map.get(`k${i}`), i);
  });

  it("built at once from columns, is the map setting them one by one makes, keys given twice and equal hashes too", () => {
    // Found by search: each pair has one FNV-1a hash.
    const colliding = ["ns/s232789", "ns/s429192", "ns/s232788", "ns/s429193"];
    for (const seed of [1, 2, 3]) {
      const random = seeded(seed);
      for (const n of [0, 1, 2, 33, 1000, 20_000]) {
        const keys: string[] = [];
        const values: number[] = [];
        for (let i = 0; i < n; i++) {
          // Every fifth key one already given, most often.
          keys.push(
            i % 5 === 4 && i > 0 ? (keys[Math.floor(random() * i)] as string) : `ns-${i % 7}/svc-${i}`,
          );
          values.push(i);
        }
        if (n > 2)
          for (const [i, key] of [...colliding, colliding[0] as string].entries()) {
            keys.splice(Math.floor(random() * keys.length), 0, key);
            values.push(-i);
          }
        const editor = PersistentMap.empty<number>().edit();
        for (const [i, key] of keys.entries()) editor.set(key, values[i] as number);
        const oneByOne = editor.done();
        const atOnce = PersistentMap.fromColumns(keys, values);
        assert.equal(atOnce.size, oneByOne.size);
        assert.deepEqual(atOnce.columns(), oneByOne.columns(), `seed ${seed}, ${n} keys`);
        for (const key of keys) assert.equal(atOnce.get(key), oneByOne.get(key));
        // Edits of either give the same maps.
        const edited = (m: PersistentMap<number>) =>
          m
            .delete(keys[0] ?? "")
            .set("new", 1)
            .delete(colliding[1] as string);
        assert.deepEqual(edited(atOnce).columns(), edited(oneByOne).columns());
      }
    }
  });

  it("returns the same map when an edit changes nothing", () => {
    const map = PersistentMap.from([["a", 1]]);
    assert.equal(map.set("a", 1), map);
    assert.equal(map.delete("b"), map);
    const editor = map.edit();
    editor.set("a", 1);
    assert.equal(editor.done(), map);
  });

  it("stores undefined as a value, distinct from absence", () => {
    const map = PersistentMap.empty<number | undefined>().set("a", undefined);
    assert.equal(map.has("a"), true);
    assert.equal(map.has("b"), false);
    assert.equal(map.size, 1);
  });

  it("refuses an editor used after done()", () => {
    const editor = PersistentMap.empty<number>().edit();
    editor.done();
    assert.throws(() => editor.set("a", 1), /after done/);
  });
});
