// The listings a restart adopts the table from: chains, sets and the elements kpng diffs, read from
// nft's JSON a piece at a time (a map of a million elements is read a run of elements at a time,
// to the same result), and which listings it asks for: never the endpoint maps of the generation
// that serves.

import assert from "node:assert/strict";
import { test } from "node:test";
import { readTable, TableReader } from "../../../../src/backends/nft/adopt.ts";
import { FakeNft } from "../../../support/fake-nft.ts";

const parseListing = (bytes: Buffer) => {
  const reader = new TableReader("kpng");
  reader.read(bytes);
  return reader.adopted(0);
};

const listed = (json: unknown, space?: string) =>
  parseListing(Buffer.from(JSON.stringify(json, null, space)));

test("a listing is parsed into chains, sets and canonical element keys; other tables' objects are skipped", () => {
  const t = listed({
    nftables: [
      { chain: { table: "kpng", name: "svc-x" } },
      { chain: { table: "other", name: "svc-z" } },
      {
        map: {
          table: "other",
          name: "service-ips",
          elem: [[{ concat: ["1.1.1.1", "tcp", 1] }, { drop: null }]],
        },
      },
      {
        map: {
          table: "kpng",
          name: "service-ips",
          elem: [[{ concat: ["203.0.113.1", "tcp", 80] }, { goto: { target: "svc-x" } }]],
        },
      },
      { set: { table: "kpng", name: "cluster-ips", elem: ["203.0.113.1"] } },
      { set: { table: "kpng", name: "aff-y" } },
      // As nft 1.0.6 prints a typeof map of endpoints.
      {
        map: {
          table: "kpng",
          name: "endpoints-tcp",
          type: ["ipv4_addr", "inet_service", "integer"],
          map: "ipv4_addr . inet_service",
          elem: [[{ concat: ["203.0.113.1", 80, 1] }, { concat: ["198.51.100.1", 8080] }]],
        },
      },
    ],
  });
  assert.deepEqual(t.chains, ["svc-x"]);
  assert.deepEqual(t.sets, ["service-ips", "cluster-ips", "aff-y", "endpoints-tcp"]);
  assert.equal(t.elements.get("endpoints-tcp")?.get("203.0.113.1 . 80 . 1"), "198.51.100.1 . 8080");
  assert.equal(t.elements.get("service-ips")?.get("203.0.113.1 . tcp . 80"), "goto svc-x");
  assert.equal(t.elements.get("service-ips")?.size, 1);
  assert.equal(t.elements.get("cluster-ips")?.get("203.0.113.1"), "");
  assert.throws(() => listed({}), /nftables array/);
});

test("a map too large to parse whole is read a run of elements at a time, to the same result", () => {
  const elem = Array.from({ length: 30_000 }, (_, i) => [
    { concat: [`10.96.${i >> 8}.${i & 255}`, 80, i % 10] },
    { concat: [`10.1.${i >> 8}.${i & 255}`, 8080] },
  ]);
  const verdicts = Array.from({ length: 20_000 }, (_, i) => [
    { concat: [`10.96.${i >> 8}.${i & 255}`, "tcp", 80] },
    { goto: { target: `pick-tcp-${1 + (i % 3)}` } },
  ]);
  const json = {
    nftables: [
      { metainfo: { version: "1.0.6", json_schema_version: 1 } },
      { table: { family: "ip", name: "kpng", handle: 1 } },
      { map: { family: "ip", name: "endpoints-tcp", table: "kpng", map: "ipv4_addr . inet_service", elem } },
      { map: { family: "ip", name: "service-ips", table: "kpng", map: "verdict", elem: verdicts } },
      { chain: { family: "ip", table: "kpng", name: "pick-tcp-1", handle: 3 } },
    ],
  };
  const text = JSON.stringify(json, null, 1);
  assert.ok(text.length > 2 * 1024 * 1024, "both maps are larger than an item parsed whole");
  // nft prints `{"a": 1, "b": [2, 3]}`: spaces after the colons and commas, no newlines.
  for (const t of [text, JSON.stringify(json), JSON.stringify(json).replaceAll(/([,:])/g, "$1 ")]) {
    const got = parseListing(Buffer.from(t));
    assert.deepEqual(got.chains, ["pick-tcp-1"]);
    assert.deepEqual(got.sets, ["endpoints-tcp", "service-ips"]);
    assert.equal(got.elements.get("endpoints-tcp")?.size, 30_000);
    assert.equal(got.elements.get("endpoints-tcp")?.get("10.96.117.47 . 80 . 9"), "10.1.117.47 . 8080");
    assert.equal(got.elements.get("service-ips")?.size, 20_000);
    assert.equal(got.elements.get("service-ips")?.get("10.96.78.31 . tcp . 80"), "goto pick-tcp-2");
  }
});

test("a listing that stops making sense fails with where: a cut one, one that is not JSON", () => {
  const whole = JSON.stringify({
    nftables: [
      { table: { name: "kpng" } },
      { set: { table: "kpng", name: "cluster-ips", elem: ["10.0.0.1"] } },
    ],
  });
  assert.throws(
    () => parseListing(Buffer.from(whole.slice(0, -10))),
    /nft listing: unterminated object at byte 39/,
  );
  assert.throws(
    () => parseListing(Buffer.from("Error: no such table")),
    /nft listing: expected \{ at byte 0/,
  );
  assert.throws(() => listed({ other: [] }), /nftables array/);
});

const ENDPOINT_MAP = "{ typeof ip daddr . th dport . numgen random mod 1 : ip daddr . tcp dport; }";
const DISPATCH = "{ type ipv4_addr . inet_proto . inet_service : verdict; }";

/** A kpng table serving from the endpoint maps of `generations`, beside another table. */
async function tableOn(generations: readonly string[]): Promise<FakeNft> {
  const nft = new FakeNft();
  const lines = [
    "add table ip other",
    "add chain ip other svc-z",
    "add table ip kpng",
    "add chain ip kpng pick-tcp-1",
    `add map ip kpng service-ips ${DISPATCH}`,
    "add set ip kpng cluster-ips { type ipv4_addr; }",
    "add element ip kpng service-ips { 10.96.0.1 . tcp . 80 : goto pick-tcp-1 }",
    "add element ip kpng cluster-ips { 10.96.0.1 }",
  ];
  for (const suffix of generations)
    lines.push(
      `add map ip kpng endpoints-tcp${suffix} ${ENDPOINT_MAP}`,
      `add element ip kpng endpoints-tcp${suffix} { 10.96.0.1 . 80 . 0 : 10.1.0.1 . 8080 }`,
    );
  await nft.run(`${lines.join("\n")}\n`);
  return nft;
}

test("a restart lists declarations, then the elements of the maps kpng diffs; never an endpoint map that serves", async () => {
  for (const [serving, next] of [
    ["", 1],
    ["-g1", 0],
  ] as const) {
    const nft = await tableOn([serving]);
    const t = await readTable(nft, "ip", "kpng");
    assert.ok(t !== undefined);
    assert.equal(t.generation, next);
    assert.deepEqual(t.chains, ["pick-tcp-1"], "the other table's chains are not kpng's");
    assert.ok(t.sets.includes(`endpoints-tcp${serving}`), "known by name, to be retired");
    assert.equal(t.elements.get("service-ips")?.get("10.96.0.1 . tcp . 80"), "goto pick-tcp-1");
    assert.equal(t.elements.get("cluster-ips")?.has("10.96.0.1"), true);
    assert.equal(t.elements.has(`endpoints-tcp${serving}`), false);
    assert.ok(
      nft.listings.every((l) => !l.includes("endpoints-")),
      nft.listings.join("\n"),
    );
  }
  assert.equal(await readTable(new FakeNft(), "ip", "kpng"), undefined, "no table");
});

test("both generations in the table (a restart stopped half way): generation 0's endpoints are listed and kept", async () => {
  const nft = await tableOn(["", "-g1"]);
  const t = await readTable(nft, "ip", "kpng");
  assert.equal(t?.generation, 0);
  assert.equal(t?.elements.get("endpoints-tcp")?.get("10.96.0.1 . 80 . 0"), "10.1.0.1 . 8080");
  assert.equal(t?.elements.has("endpoints-tcp-g1"), false);
  assert.ok(t?.sets.includes("endpoints-tcp-g1"));
});

test("a set that goes away between the listings fails the read, to be retried", async () => {
  const nft = await tableOn([""]);
  const list = nft.list.bind(nft);
  const vanishing = {
    list: (family: "ip" | "ip6", table: string, what: Parameters<FakeNft["list"]>[2]) =>
      "name" in what && what.name === "cluster-ips" ? Promise.resolve(undefined) : list(family, table, what),
  };
  await assert.rejects(
    readTable(vanishing, "ip", "kpng"),
    /set cluster-ips of table ip kpng went away while listed/,
  );
});
