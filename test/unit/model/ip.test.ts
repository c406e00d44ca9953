import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { canonicalIP } from "../../../src/model/ip.ts";

describe("canonicalIP", () => {
  const rows: [rule: string, input: string, want: string][] = [
    ["a plain dotted quad stays as it is", "192.0.2.10", "192.0.2.10"],
    ["the edges of each octet", "255.0.250.199", "255.0.250.199"],
    ["IPv6 is lower-case and compressed", "2001:DB8:0000::00C", "2001:db8::c"],
    ["IPv4-mapped IPv6 keeps its form", "::ffff:192.0.2.1", "::ffff:c000:201"],
  ];
  for (const [rule, input, want] of rows) it(rule, () => assert.equal(canonicalIP(input), want));

  it("an octet out of range is not taken as canonical", () => {
    assert.throws(() => canonicalIP("256.1.1.1"));
  });
});
