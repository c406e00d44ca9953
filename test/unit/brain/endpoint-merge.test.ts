import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { endpointsOfPort, mergeEndpoints } from "../../../src/brain/endpoint-merge.ts";
import type { EndpointPort, EndpointSlice, IPFamily, SliceEndpoint } from "../../../src/model/kube.ts";
import { compareAddresses, compareEndpoints, inStrictAddressOrder } from "../../../src/model/order.ts";
import { seeded } from "../../support/seeded.ts";
import { ep, slice, terminating } from "./fixtures.ts";

const named = (name: string) => ({ name, namespace: "ns", service: "web" });
const HTTP = { name: "http", protocol: "TCP" } as const;

describe("mergeEndpoints: one endpoint per ip:port, in address order", () => {
  const rows = [
    {
      rule: "endpoints are sorted by address value, then port",
      slices: [slice([ep("10.0.0.10"), ep("10.0.0.9"), ep("10.0.0.2")])],
      want: ["10.0.0.2 n2", "10.0.0.9 n2", "10.0.0.10 n2"],
    },
    {
      rule: "the same ip:port in two slices: a non-terminating copy wins over a terminating one",
      slices: [
        slice([terminating("10.0.0.1", { node: "old" })], named("a")),
        slice([ep("10.0.0.1", { node: "new" })], named("b")),
      ],
      want: ["10.0.0.1 new"],
    },
    {
      rule: "a terminating copy seen later does not replace a non-terminating one",
      slices: [
        slice([ep("10.0.0.1", { node: "kept" })], named("a")),
        slice([terminating("10.0.0.1", { node: "late" })], named("b")),
      ],
      want: ["10.0.0.1 kept"],
    },
    {
      rule: "among non-terminating copies the last seen wins",
      slices: [
        slice([ep("10.0.0.1", { node: "first" })], named("a")),
        slice([ep("10.0.0.1", { node: "second" })], named("b")),
      ],
      want: ["10.0.0.1 second"],
    },
    {
      rule: "three copies: the last non-terminating one wins",
      slices: [
        slice([terminating("10.0.0.1", { node: "first" })], named("a")),
        slice([ep("10.0.0.1", { node: "second" })], named("b")),
        slice([ep("10.0.0.1", { node: "third" }), terminating("10.0.0.1", { node: "fourth" })], named("c")),
      ],
      want: ["10.0.0.1 third"],
    },
    {
      rule: "among terminating copies only, the first seen stays",
      slices: [
        slice([terminating("10.0.0.1", { node: "first" })], named("a")),
        slice([terminating("10.0.0.1", { node: "second" })], named("b")),
      ],
      want: ["10.0.0.1 first"],
    },
    {
      rule: "one address on two target ports (two slices) is two endpoints",
      slices: [
        slice([ep("10.0.0.1")], { ...named("a"), ports: [{ name: "http", protocol: "TCP", port: 9090 }] }),
        slice([ep("10.0.0.1")], named("b")),
      ],
      want: ["10.0.0.1 n2", "10.0.0.1 n2"],
      ports: [8080, 9090],
    },
  ];
  for (const row of rows) {
    it(row.rule, () => {
      const merged = endpointsOfPort(mergeEndpoints(row.slices, "IPv4"), HTTP);
      assert.deepEqual(
        merged.map((e) => `${e.ip} ${e.nodeName}`),
        row.want,
      );
      if (row.ports !== undefined)
        assert.deepEqual(
          merged.map((e) => e.port),
          row.ports,
        );
    });
  }
});

/**
 * The rules above applied the plain way: every slice endpoint of every matching port into one
 * list, a stable sort by ip then port, and of each ip:port the last non-terminating copy (else
 * the first).
 */
function sortedByRules(slices: readonly EndpointSlice[], family: IPFamily, key: string) {
  const all: { ip: string; port: number; ep: SliceEndpoint }[] = [];
  for (const s of slices) {
    if (s.addressType !== family) continue;
    for (const port of s.ports) {
      if (port.name === null || !port.port || `${port.name}/${port.protocol}` !== key) continue;
      for (const ep of s.endpoints) {
        const ip = ep.addresses[0];
        if (ip !== undefined) all.push({ ip, port: port.port, ep });
      }
    }
  }
  all.sort(compareEndpoints);
  const out: typeof all = [];
  for (let i = 0; i < all.length; ) {
    let j = i + 1;
    while (j < all.length && compareEndpoints(all[i] as (typeof all)[0], all[j] as (typeof all)[0]) === 0)
      j++;
    let win = all[i] as (typeof all)[0];
    for (let k = j - 1; k > i; k--) {
      if ((all[k] as (typeof all)[0]).ep.conditions.terminating !== true) {
        win = all[k] as (typeof all)[0];
        break;
      }
    }
    out.push(win);
    i = j;
  }
  return out.map((e) => `${e.ip}:${e.port} ${e.ep.nodeName}`);
}

describe("mergeEndpoints on random slices gives what sorting them all gives", () => {
  const random = seeded(1672);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
  const v4 = ["10.0.0.1", "10.0.0.2", "10.0.0.9", "10.0.0.10", "10.0.1.1", "192.0.2.200"];
  const v6 = ["2001:db8::1", "2001:db8::2", "2001:db8::a", "2001:db8::1:0"];
  const ports: readonly EndpointPort[] = [
    { name: "http", protocol: "TCP", port: 8080 },
    { name: "http", protocol: "TCP", port: 9090 },
    { name: "http", protocol: "UDP", port: 8080 },
    { name: "dns", protocol: "UDP", port: 53 },
    { name: null, protocol: "TCP", port: 80 },
    { name: "http", protocol: "TCP", port: 0 },
  ];
  for (let round = 0; round < 300; round++) {
    const slices = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, n) => {
      const family: IPFamily = random() < 0.7 ? "IPv4" : "IPv6";
      const pool = family === "IPv4" ? v4 : v6;
      // Half the slices list their endpoints in order, as the API usually does.
      const ips = Array.from({ length: Math.floor(random() * 6) }, () => pick(pool));
      if (random() < 0.5) ips.sort(compareAddresses);
      const endpoints = ips.map((ip, i) =>
        random() < 0.1
          ? ep(ip, { addresses: [], node: `e${i}` })
          : random() < 0.3
            ? terminating(ip, { node: `t${n}.${i}` })
            : ep(ip, { node: `n${n}.${i}` }),
      );
      const slicePorts = Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(ports));
      return slice(endpoints, { name: `s${n}`, addressType: family, ports: slicePorts });
    });
    it(`round ${round}`, () => {
      // Slices as the reader gives them (their order recorded) and as built elsewhere (without).
      const recorded = slices.map((s) => ({ ...s, inAddressOrder: inStrictAddressOrder(s.endpoints) }));
      for (const [family, given] of [
        ["IPv4", slices],
        ["IPv6", slices],
        ["IPv4", recorded],
        ["IPv6", recorded],
      ] as const) {
        const merged = mergeEndpoints(given, family);
        for (const port of [
          HTTP,
          { name: "http", protocol: "UDP" },
          { name: "dns", protocol: "UDP" },
        ] as const) {
          const got = endpointsOfPort(merged, port).map((e) => `${e.ip}:${e.port} ${e.nodeName}`);
          const key = `${port.name}/${port.protocol}`;
          assert.deepEqual(got, sortedByRules(slices, family, key), `${family} ${key}`);
        }
        // One entry per slice port (name and protocol), whichever slices have it.
        const keys = merged.map((p) => `${p.name}/${p.protocol}`);
        assert.equal(new Set(keys).size, keys.length, keys.join());
      }
    });
  }
});
