import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { mergeServiceRanges } from "../../../src/brain/service-ranges.ts";

describe("mergeServiceRanges", () => {
  const rows: { name: string; in: string[]; want: string[] }[] = [
    { name: "nothing", in: [], want: [] },
    { name: "one range", in: ["198.51.100.0/24"], want: ["198.51.100.0/24"] },
    {
      name: "IPv4 first, then by address",
      in: ["2001:db8:1::/112", "203.0.113.0/24", "198.51.100.0/24"],
      want: ["198.51.100.0/24", "203.0.113.0/24", "2001:db8:1::/112"],
    },
    { name: "repeats once", in: ["198.51.100.0/24", "198.51.100.0/24"], want: ["198.51.100.0/24"] },
    {
      name: "a range inside another is left out (widening)",
      in: ["198.51.100.0/25", "198.51.100.0/24", "198.51.100.128/26"],
      want: ["198.51.100.0/24"],
    },
    {
      name: "neighbours stay apart",
      in: ["198.51.100.128/25", "198.51.100.0/25"],
      want: ["198.51.100.0/25", "198.51.100.128/25"],
    },
    {
      name: "IPv6 nesting",
      in: ["2001:db8:1::/120", "2001:db8:1::/112", "2001:db8:2::/112"],
      want: ["2001:db8:1::/112", "2001:db8:2::/112"],
    },
    {
      name: "address order is numeric, not textual",
      in: ["198.51.100.128/25", "198.51.100.64/26"],
      want: ["198.51.100.64/26", "198.51.100.128/25"],
    },
    {
      name: "text that is not a CIDR is ignored",
      in: ["nonsense", "198.51.100.0/24"],
      want: ["198.51.100.0/24"],
    },
  ];
  for (const row of rows) {
    test(row.name, () => assert.deepEqual(mergeServiceRanges(row.in), row.want));
  }
});
