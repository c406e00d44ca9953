import assert from "node:assert/strict";
import { isIPv4 } from "node:net";
import { describe, test } from "node:test";
import { ipv4Value } from "../../../src/model/ipv4.ts";
import { compareEndpoints } from "../../../src/model/order.ts";

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
