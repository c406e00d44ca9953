import assert from "node:assert/strict";
import { isIPv4 } from "node:net";
import { describe, test } from "node:test";
import { ipv4Value } from "../../../src/model/ipv4.ts";
import type { SliceEndpoint } from "../../../src/model/kube.ts";
import {
  compareAddresses,
  compareEndpoints,
  inStrictAddressOrder,
  inStrictEndpointOrder,
} from "../../../src/model/order.ts";
import { parseEndpointSlice } from "../../../src/model/validate.ts";

const ep = (ip: string, port: number) => ({ ip, port });

describe("compareEndpoints: the one order of endpoint lists", () => {
  const cases = [
    {
      name: "IPv4 addresses are in value order, not text order (.8 before .40, .9 before .10)",
      input: [ep("10.0.0.40", 80), ep("10.0.0.8", 80), ep("10.0.0.10", 80), ep("10.0.0.9", 80)],
      want: ["10.0.0.8", "10.0.0.9", "10.0.0.10", "10.0.0.40"],
    },
    {
      name: "IPv4 endpoints come before IPv6 ones",
      input: [ep("2001:db8:1::1", 80), ep("198.51.100.200", 80)],
      want: ["198.51.100.200", "2001:db8:1::1"],
    },
    {
      name: "IPv6 addresses are in value order (::9 before ::10, :: before ::1:0)",
      input: [ep("2001:db8::10", 80), ep("2001:db8::1:0", 80), ep("2001:db8::9", 80)],
      want: ["2001:db8::9", "2001:db8::10", "2001:db8::1:0"],
    },
    {
      name: "the same address on two ports is in port order",
      input: [ep("198.51.100.2", 9090), ep("198.51.100.2", 8080)],
      want: ["198.51.100.2", "198.51.100.2"],
      ports: [8080, 9090],
    },
  ];
  for (const tc of cases) {
    test(tc.name, () => {
      const sorted = [...tc.input].sort(compareEndpoints);
      assert.deepEqual(
        sorted.map((e) => e.ip),
        tc.want,
      );
      if (tc.ports)
        assert.deepEqual(
          sorted.map((e) => e.port),
          tc.ports,
        );
    });
  }
});

describe("inStrictEndpointOrder: a list already sorted needs no sort", () => {
  const rows = [
    { name: "an empty list and one endpoint are in order", list: [], want: true },
    { name: "one endpoint is in order", list: [ep("10.0.0.1", 80)], want: true },
    { name: "IPv4 by value: .9 before .10", list: [ep("10.0.0.9", 80), ep("10.0.0.10", 80)], want: true },
    {
      name: "IPv4 in text order only is not (.10 before .9)",
      list: [ep("10.0.0.10", 80), ep("10.0.0.9", 80)],
      want: false,
    },
    { name: "one address on rising ports", list: [ep("10.0.0.1", 80), ep("10.0.0.1", 81)], want: true },
    {
      name: "one ip:port twice is not (a copy to merge)",
      list: [ep("10.0.0.1", 80), ep("10.0.0.1", 80)],
      want: false,
    },
    { name: "falling ports on one address", list: [ep("10.0.0.1", 81), ep("10.0.0.1", 80)], want: false },
    { name: "IPv4 then IPv6", list: [ep("10.0.0.1", 80), ep("2001:db8::1", 80)], want: true },
    { name: "IPv6 then IPv4", list: [ep("2001:db8::1", 80), ep("10.0.0.1", 80)], want: false },
    {
      name: "IPv6 by value: ::9 before ::10",
      list: [ep("2001:db8::9", 80), ep("2001:db8::10", 80)],
      want: true,
    },
    {
      name: "a copy after the first pair",
      list: [ep("10.0.0.1", 80), ep("10.0.0.2", 80), ep("10.0.0.2", 80)],
      want: false,
    },
  ];
  for (const row of rows) test(row.name, () => assert.equal(inStrictEndpointOrder(row.list), row.want));

  test("agrees with comparing each pair on random lists of both families", () => {
    let seed = 11;
    const next = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed;
    };
    const ips = ["10.0.0.1", "10.0.0.2", "10.0.0.10", "10.0.1.0", "2001:db8::1", "2001:db8::a", "fd00::1"];
    for (let i = 0; i < 5000; i++) {
      const list = Array.from({ length: next() % 5 }, () =>
        ep(ips[next() % ips.length] as string, 80 + (next() % 2)),
      );
      if (next() % 2 === 0) list.sort(compareEndpoints);
      const pairwise = list.every((e, k) => k === 0 || compareEndpoints(list[k - 1] as typeof e, e) < 0);
      assert.equal(inStrictEndpointOrder(list), pairwise, JSON.stringify(list));
    }
  });
});

describe("ipv4Value: a dotted quad read as node:net reads it", () => {
  const rows: readonly (readonly [string, number])[] = [
    ["0.0.0.0", 0],
    ["10.0.0.1", 0x0a000001],
    ["255.255.255.255", 0xffffffff],
    ["198.51.100.7", (198 * 256 ** 3 + 51 * 256 ** 2 + 100 * 256 + 7) >>> 0],
    ["01.2.3.4", -1],
    ["1.2.3.256", -1],
    ["1.2.3", -1],
    ["1.2.3.4.5", -1],
    ["1..3.4", -1],
    [".1.2.3", -1],
    ["1.2.3.", -1],
    ["1.2.3.4 ", -1],
    ["::1", -1],
    ["", -1],
  ];
  for (const [text, want] of rows) {
    test(`${JSON.stringify(text)} → ${want}`, () => {
      assert.equal(ipv4Value(text), want);
      assert.equal(ipv4Value(text) >= 0, isIPv4(text));
    });
  }
  test("agrees with isIPv4 on random near-addresses", () => {
    let seed = 7;
    const next = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed;
    };
    const parts = [
      "0",
      "00",
      "01",
      "1",
      "9",
      "10",
      "99",
      "100",
      "199",
      "200",
      "249",
      "250",
      "255",
      "256",
      "999",
      "",
    ];
    for (let i = 0; i < 20000; i++) {
      const n = 3 + (next() % 3);
      const text = Array.from({ length: n }, () => parts[next() % parts.length]).join(".");
      assert.equal(ipv4Value(text) >= 0, isIPv4(text), text);
    }
  });
});

describe("inStrictAddressOrder: a slice's endpoints in address order, none twice", () => {
  const at = (...addresses: string[]) => ({ addresses }) as unknown as SliceEndpoint;
  const rows = [
    { name: "no endpoints", list: [], want: true },
    { name: ".9 before .10", list: [at("10.0.0.9"), at("10.0.0.10")], want: true },
    { name: ".10 before .9", list: [at("10.0.0.10"), at("10.0.0.9")], want: false },
    { name: "one address twice", list: [at("10.0.0.1"), at("10.0.0.1")], want: false },
    { name: "an endpoint without an address", list: [at("10.0.0.1"), at()], want: false },
    { name: "the first address decides", list: [at("10.0.0.1", "10.0.0.9"), at("10.0.0.2")], want: true },
    { name: "IPv6 by value", list: [at("2001:db8::9"), at("2001:db8::10")], want: true },
  ];
  for (const row of rows) test(row.name, () => assert.equal(inStrictAddressOrder(row.list), row.want));

  test("the slice reader records it for the brain", () => {
    const read = (addresses: string[]) => {
      const parsed = parseEndpointSlice({
        apiVersion: "discovery.k8s.io/v1",
        kind: "EndpointSlice",
        metadata: { name: "web-abc", namespace: "ns", labels: { "kubernetes.io/service-name": "web" } },
        addressType: "IPv4",
        endpoints: addresses.map((a) => ({ addresses: [a] })),
      });
      assert.ok(parsed.ok);
      return parsed.value.inAddressOrder;
    };
    assert.equal(read(["10.0.0.2", "10.0.0.10"]), true);
    assert.equal(read(["10.0.0.10", "10.0.0.2"]), false);
    assert.equal(read(["10.0.0.2", "10.0.0.2"]), false);
  });

  test("what the slice reader records is what inStrictAddressOrder finds, on random slices", () => {
    let seed = 7;
    const next = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed >>> 8;
    };
    const pools = {
      IPv4: ["10.0.0.1", "10.0.0.2", "10.0.0.10", "10.0.1.0", "192.0.2.1"],
      IPv6: ["2001:db8::1", "2001:db8::a", "2001:db8::10", "fd00::1"],
    };
    for (let i = 0; i < 3000; i++) {
      const addressType = next() % 3 === 0 ? "IPv6" : "IPv4";
      const pool = pools[addressType];
      const endpoints = Array.from({ length: next() % 5 }, () => ({
        addresses: next() % 8 === 0 ? [] : [pool[next() % pool.length] as string],
        conditions: { ready: next() % 2 === 0 },
      }));
      if (next() % 2 === 0)
        endpoints.sort((a, b) => compareAddresses(a.addresses[0] ?? "", b.addresses[0] ?? ""));
      const parsed = parseEndpointSlice({
        metadata: { name: "web-abc", namespace: "ns", labels: { "kubernetes.io/service-name": "web" } },
        addressType,
        endpoints,
      });
      assert.ok(parsed.ok, JSON.stringify(endpoints));
      assert.equal(
        parsed.value.inAddressOrder,
        inStrictAddressOrder(parsed.value.endpoints),
        JSON.stringify(endpoints),
      );
    }
  });
});
