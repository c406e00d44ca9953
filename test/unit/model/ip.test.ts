import assert from "node:assert/strict";
import { test } from "node:test";
import { canonicalIP } from "../../../src/model/ip.ts";

test("canonicalIP: canonical dotted quads pass as they are; other forms are parsed and rewritten", () => {
  for (const [input, want] of [
    ["10.0.0.1", "10.0.0.1"],
    ["0.0.0.0", "0.0.0.0"],
    ["255.255.255.255", "255.255.255.255"],
    ["192.0.2.250", "192.0.2.250"],
    ["2001:DB8:0:0::1", "2001:db8::1"],
    ["::1", "::1"],
  ] as const)
    assert.equal(canonicalIP(input), want, input);
  for (const bad of ["256.1.1.1", "1.2.3.4.5", "x"]) assert.throws(() => canonicalIP(bad), bad);
});
