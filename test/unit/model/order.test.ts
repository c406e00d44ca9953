import assert from "node:assert/strict";
import { describe, test } from "node:test";
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
