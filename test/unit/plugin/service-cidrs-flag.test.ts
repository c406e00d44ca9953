import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseServiceCIDRsFlag } from "../../../src/plugin/service-cidrs-flag.ts";
import { UsageError } from "../../../src/plugin/usage-error.ts";

describe("--service-cidrs", () => {
  const good: { in: string; want: string[] }[] = [
    { in: "198.51.100.0/24", want: ["198.51.100.0/24"] },
    { in: "198.51.100.0/24,2001:db8:1::/112", want: ["198.51.100.0/24", "2001:db8:1::/112"] },
    { in: " 198.51.100.0/24 , 203.0.113.0/24", want: ["198.51.100.0/24", "203.0.113.0/24"] },
    { in: "198.51.100.0/24,198.51.100.0/24", want: ["198.51.100.0/24"] },
  ];
  for (const row of good)
    test(`reads ${JSON.stringify(row.in)}`, () => assert.deepEqual(parseServiceCIDRsFlag(row.in), row.want));

  const bad: { in: string; message: RegExp }[] = [
    { in: "", message: /--service-cidrs: expected at least one CIDR/ },
    { in: "198.51.100.0/24,", message: /--service-cidrs: empty entry/ },
    { in: "198.51.100.0", message: /--service-cidrs: "198\.51\.100\.0" is not a CIDR/ },
    { in: "198.51.100.1/24", message: /host bits set \(the network is 198\.51\.100\.0\/24\)/ },
    { in: "2001:db8:1::/129", message: /is not a CIDR/ },
    { in: "198.51.100.0/24,0.0.0.0/0", message: /--service-cidrs: 0\.0\.0\.0\/0 covers every IPv4 address/ },
    { in: "::/0", message: /--service-cidrs: ::\/0 covers every IPv6 address/ },
  ];
  for (const row of bad) {
    test(`refuses ${JSON.stringify(row.in)} as a usage error naming the flag`, () => {
      assert.throws(
        () => parseServiceCIDRsFlag(row.in),
        (err) => err instanceof UsageError && row.message.test(err.message),
      );
    });
  }
});
