import assert from "node:assert/strict";
import { test } from "node:test";
import { healthCheckAddresses } from "../../../src/host/listen-addresses.ts";

const host = ["192.0.2.1", "198.51.100.1", "2001:db8::1", "127.0.0.1"];

for (const [name, cidrs, want] of [
  [
    "the node's addresses inside the node-port CIDRs",
    ["192.0.2.1/32", "2001:db8::1/128"],
    ["192.0.2.1", "2001:db8::1"],
  ],
  [
    "a wider CIDR takes every host address inside it",
    ["192.0.2.0/24", "198.51.100.0/24"],
    ["192.0.2.1", "198.51.100.1"],
  ],
  ["a whole family is its wildcard address", ["0.0.0.0/0", "2001:db8::/64"], ["0.0.0.0", "2001:db8::1"]],
  ["no node-port addresses: nowhere", [], []],
] as const) {
  test(`healthCheckAddresses: ${name}`, () => assert.deepEqual(healthCheckAddresses(cidrs, host), want));
}
