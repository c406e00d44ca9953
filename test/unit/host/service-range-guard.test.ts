import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { checkServiceRanges, guardServiceRanges } from "../../../src/host/service-range-guard.ts";
import { type LocalState, splitServiceCIDRs } from "../../../src/model/local.ts";
import { capturingLogger } from "../../faults/support.ts";

const node = { nodeIPs: ["192.0.2.1", "2001:db8::1"], gateways: ["192.0.2.254", "fe80::1"] };

describe("Service IP ranges against the node's own addresses", () => {
  const rows = [
    { range: "198.51.100.0/24", refused: undefined },
    { range: "192.0.2.0/24", refused: "holds the node's own address 192.0.2.1" },
    { range: "192.0.2.128/25", refused: "holds the node's gateway 192.0.2.254" },
    { range: "2001:db8::/64", refused: "holds the node's own address 2001:db8::1" },
    { range: "fe80::/64", refused: "holds the node's gateway fe80::1" },
    { range: "2001:db8:1::/112", refused: undefined },
  ];
  for (const row of rows)
    test(`${row.range}: ${row.refused ?? "kept"}`, () => {
      const { kept, refused } = checkServiceRanges([row.range], node);
      if (row.refused === undefined) assert.deepEqual(kept, [row.range]);
      else assert.deepEqual(refused, [{ range: row.range, reason: row.refused }]);
    });

  test("the feed leaves refused ranges out, logs each once, and passes safe states through unchanged", () => {
    const { log, lines } = capturingLogger();
    const seen: LocalState[] = [];
    let push: (s: LocalState) => void = () => {};
    const feed = guardServiceRanges(
      {
        subscribe: (l) => {
          push = (s) => void l(s);
          return () => {};
        },
      },
      node,
      log,
    );
    feed.subscribe((s) => void seen.push(s));
    const state = (serviceCIDRs: string[], revision: number): LocalState => ({
      node: "n",
      revision,
      services: new Map(),
      serviceCIDRs: splitServiceCIDRs(serviceCIDRs),
    });
    const bad = ["192.0.2.0/24", "198.51.100.0/24"];
    push(state(bad, 1));
    push(state(bad, 2));
    const safe = state(["198.51.100.0/24"], 3);
    push(safe);
    assert.deepEqual(seen[0]?.serviceCIDRs, { IPv4: ["198.51.100.0/24"], IPv6: [] });
    assert.deepEqual(seen[1]?.serviceCIDRs, { IPv4: ["198.51.100.0/24"], IPv6: [] });
    assert.equal(seen[2], safe);
    assert.equal(lines.filter((l) => l.level === 40 && l.range === "192.0.2.0/24").length, 1);
  });
});
