// The listing a restart adopts the table from: chains, sets and the elements kpng diffs, read from
// nft's JSON a piece at a time. A table of 100k Services lists as 150 MB with two maps of a million
// elements; a map that large is read a run of elements at a time, to the same result.

import assert from "node:assert/strict";
import { test } from "node:test";
import { parseListing } from "../../../../src/backends/nft/adopt.ts";

const listed = (json: unknown, space?: string) =>
  parseListing(Buffer.from(JSON.stringify(json, null, space)));

test("a listing is parsed into chains, sets and canonical element keys", () => {
  const t = listed({
    nftables: [
      { chain: { name: "svc-x" } },
      {
        map: {
          name: "service-ips",
          elem: [[{ concat: ["203.0.113.1", "tcp", 80] }, { goto: { target: "svc-x" } }]],
        },
      },
      { set: { name: "cluster-ips", elem: ["203.0.113.1"] } },
      { set: { name: "aff-y" } },
      // As nft 1.0.6 prints a typeof map of endpoints.
      {
        map: {
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
    nftables: [{ table: { name: "kpng" } }, { set: { name: "cluster-ips", elem: ["10.0.0.1"] } }],
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
