import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EndpointGroups, stablePlaces } from "../../../../src/backends/nft/endpoint-groups.ts";
import { HairpinEndpoints } from "../../../../src/backends/nft/hairpins.ts";

const group = (prefix: string, ...values: string[]) => ({ set: "endpoints-tcp", prefix, values });
const text = (ops: Iterable<{ op: string; key: string; value: string }>) =>
  [...ops].map((o) => `${o.op} ${o.key}${o.value ? ` : ${o.value}` : ""}`);
/** Everything the groups owe, in the order a plan takes it: changes, then removals. */
const opsOf = (g: EndpointGroups) => {
  const changes = [...g.changes()];
  return { changes, removals: [...g.removals()] };
};
/** The hairpin additions, taken whole. */
const added = (h: HairpinEndpoints, now: number) => [...h.additions(now)];

describe("EndpointGroups", () => {
  it("a new list adds one element per endpoint; a shorter one replaces and removes the rest", () => {
    const g = new EndpointGroups();
    g.replace("a", [], [group("10.0.0.1 . 80 . ", "192.0.2.1 . 8080", "192.0.2.2 . 8080")]);
    assert.deepEqual(text(opsOf(g).changes), [
      "add 10.0.0.1 . 80 . 0 : 192.0.2.1 . 8080",
      "add 10.0.0.1 . 80 . 1 : 192.0.2.2 . 8080",
    ]);
    g.replace(
      "a",
      [group("10.0.0.1 . 80 . ", "192.0.2.1 . 8080", "192.0.2.2 . 8080")],
      [group("10.0.0.1 . 80 . ", "192.0.2.3 . 8080")],
    );
    const ops = opsOf(g);
    assert.deepEqual(text(ops.changes), [
      "delete 10.0.0.1 . 80 . 0 : 192.0.2.1 . 8080",
      "add 10.0.0.1 . 80 . 0 : 192.0.2.3 . 8080",
    ]);
    assert.deepEqual(text(ops.removals), ["delete 10.0.0.1 . 80 . 1 : 192.0.2.2 . 8080"]);
  });

  it("two services claiming one prefix: the first one's list wins whole, the second's when it leaves", () => {
    const g = new EndpointGroups();
    g.replace("a", [], [group("10.0.0.1 . 80 . ", "192.0.2.1 . 8080")]);
    g.replace("b", [], [group("10.0.0.1 . 80 . ", "192.0.2.7 . 8080", "192.0.2.8 . 8080")]);
    assert.deepEqual(text(opsOf(g).changes), ["add 10.0.0.1 . 80 . 0 : 192.0.2.1 . 8080"]);
    g.replace("a", [group("10.0.0.1 . 80 . ", "192.0.2.1 . 8080")], []);
    assert.deepEqual(text(opsOf(g).changes), [
      "delete 10.0.0.1 . 80 . 0 : 192.0.2.1 . 8080",
      "add 10.0.0.1 . 80 . 0 : 192.0.2.7 . 8080",
      "add 10.0.0.1 . 80 . 1 : 192.0.2.8 . 8080",
    ]);
  });

  it("adopted elements no service claims are removed; claimed ones are kept", () => {
    const adopted = new Map([
      [
        "endpoints-tcp",
        new Map([
          ["10.0.0.1 . 80 . 0", "192.0.2.1 . 8080"],
          ["10.0.0.9 . 80 . 0", "192.0.2.9 . 8080"],
        ]),
      ],
    ]);
    const g = new EndpointGroups(adopted);
    g.replace("a", [], [group("10.0.0.1 . 80 . ", "192.0.2.1 . 8080")]);
    g.retireUnclaimed();
    const ops = opsOf(g);
    assert.deepEqual(ops.changes, []);
    assert.deepEqual(text(ops.removals), ["delete 10.0.0.9 . 80 . 0 : 192.0.2.9 . 8080"]);
  });
});

describe("HairpinEndpoints", () => {
  it("an address used by two services is added once and kept until both let go, then waits", () => {
    const h = new HairpinEndpoints("hairpin-endpoints");
    h.use("192.0.2.1");
    h.use("192.0.2.1");
    assert.deepEqual(text(h.additions(0)), ["add 192.0.2.1 . 192.0.2.1"]);
    h.release("192.0.2.1");
    assert.deepEqual(added(h, 10), []);
    assert.equal(h.hasStale, false);
    h.release("192.0.2.1");
    assert.deepEqual(added(h, 20), []);
    assert.equal(h.hasStale, true);
    assert.deepEqual(h.expired(500, 1000), [], "not before the delay");
    assert.deepEqual(h.expired(1020, 1000), ["192.0.2.1 . 192.0.2.1"]);
    assert.equal(h.hasStale, false);
  });

  it("an address used again while waiting is not deleted", () => {
    const h = new HairpinEndpoints("hairpin-endpoints");
    h.use("192.0.2.1");
    added(h, 0);
    h.release("192.0.2.1");
    added(h, 0);
    h.use("192.0.2.1");
    assert.deepEqual(added(h, 100), [], "still in the table");
    assert.deepEqual(h.expired(5000, 1000), []);
  });

  it("adopted elements no service uses wait and go", () => {
    const h = new HairpinEndpoints("hairpin-endpoints", ["192.0.2.1 . 192.0.2.1", "192.0.2.2 . 192.0.2.2"]);
    h.use("192.0.2.1");
    added(h, 0);
    h.retireUnclaimed(0);
    assert.deepEqual(h.expired(1000, 1000), ["192.0.2.2 . 192.0.2.2"]);
  });
});

describe("stablePlaces", () => {
  const rows: [rule: string, applied: (string | undefined)[], wanted: string[], placed: string[]][] = [
    ["a first list is taken as it is", [], ["b", "a"], ["b", "a"]],
    ["one endpoint replaced: the others keep their slots", ["a", "b", "c"], ["b", "c", "z"], ["z", "b", "c"]],
    ["a list that grows: new endpoints at the end", ["a", "b"], ["c", "a", "b"], ["a", "b", "c"]],
    [
      "a list that shrinks: an endpoint past the end moves into a free slot",
      ["a", "b", "c"],
      ["c", "b"],
      ["c", "b"],
    ],
    ["the same list: the same slots", ["a", "b"], ["a", "b"], ["a", "b"]],
  ];
  for (const [rule, applied, wanted, placed] of rows) {
    it(rule, () => {
      assert.deepEqual(stablePlaces(applied, wanted), placed);
      assert.deepEqual([...stablePlaces(applied, wanted)].sort(), [...wanted].sort(), "every endpoint once");
    });
  }
});
