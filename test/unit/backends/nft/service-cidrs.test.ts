// The Service IP ranges in the nft tables: the rules that use them, the statements that fill the
// range set, and how a sync applies a change of ranges (alone, whole, in one transaction).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { NftBackend } from "../../../../src/backends/nft/backend.ts";
import { skeletonOps } from "../../../../src/backends/nft/base.ts";
import { renderOp } from "../../../../src/backends/nft/ops.ts";
import { serviceCIDROps } from "../../../../src/backends/nft/service-cidrs.ts";
import { ipFamilyOfNft } from "../../../../src/model/ip.ts";
import { splitServiceCIDRs } from "../../../../src/model/local.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { FakeNft } from "../../../support/fake-nft.ts";
import { sent, service, state, V4, V6 } from "./fixtures.ts";

const RANGES = ["198.51.100.0/24", "203.0.113.0/24", "2001:db8:1::/112"];

describe("Service range rules", () => {
  for (const cfg of [V4, V6]) {
    test(`${cfg.family}: the cluster-IPs check rejects allocated IPs first, then drops the rest of the ranges`, () => {
      const lines = skeletonOps(cfg).map((op) => renderOp(op, cfg.family, cfg.table));
      const t = `${cfg.family} ${cfg.table}`;
      const chain = lines.filter((l) => l.startsWith(`add rule ${t} cluster-ips-check `));
      assert.deepEqual(chain, [
        `add rule ${t} cluster-ips-check ${cfg.family} daddr @cluster-ips reject`,
        `add rule ${t} cluster-ips-check ${cfg.family} daddr @service-cidrs drop`,
      ]);
      const addr = cfg.family === "ip" ? "ipv4_addr" : "ipv6_addr";
      assert.ok(lines.includes(`add set ${t} service-cidrs { type ${addr}; flags interval; auto-merge; }`));
      // Only new connections reach the check: established traffic is never dropped by it.
      for (const hook of ["filter-forward", "filter-output-post-dnat"]) {
        assert.ok(lines.includes(`add rule ${t} ${hook} ct state new jump cluster-ips-check`), hook);
      }
    });
  }

  const rows: { name: string; family: "ip" | "ip6"; cidrs: string[]; want: string[] }[] = [
    {
      name: "IPv4 ranges go to the ip table",
      family: "ip",
      cidrs: RANGES,
      want: [
        "flush set ip kpng service-cidrs",
        "add element ip kpng service-cidrs { 198.51.100.0/24, 203.0.113.0/24 }",
      ],
    },
    {
      name: "IPv6 ranges go to the ip6 table",
      family: "ip6",
      cidrs: RANGES,
      want: ["flush set ip6 kpng service-cidrs", "add element ip6 kpng service-cidrs { 2001:db8:1::/112 }"],
    },
    {
      name: "no range of the family: the set is emptied",
      family: "ip6",
      cidrs: ["198.51.100.0/24"],
      want: ["flush set ip6 kpng service-cidrs"],
    },
  ];
  for (const row of rows) {
    test(row.name, () => {
      assert.deepEqual(
        serviceCIDROps(splitServiceCIDRs(row.cidrs)[ipFamilyOfNft(row.family)]).map((op) =>
          renderOp(op, row.family, "kpng"),
        ),
        row.want,
      );
    });
  }
});

describe("Service ranges in a sync", () => {
  function setup() {
    const nft = new FakeNft();
    const backend = new NftBackend({ runner: nft, tables: [V4, V6], log: silentLogger });
    return { nft, backend };
  }
  const keys = (m: ReadonlyMap<string, string> | undefined) => [...(m?.keys() ?? [])].sort();

  test("the first sync fills the range set of each family", async () => {
    const { nft, backend } = setup();
    await backend.sync(state([service()], 1, RANGES));
    assert.deepEqual(keys(nft.elements("ip", "kpng", "service-cidrs")), [
      "198.51.100.0/24",
      "203.0.113.0/24",
    ]);
    assert.deepEqual(keys(nft.elements("ip6", "kpng", "service-cidrs")), ["2001:db8:1::/112"]);
  });

  test("a change of ranges rewrites that family's set alone, in one transaction; the same ranges, nothing", async () => {
    const { nft, backend } = setup();
    const services = [service()];
    await backend.sync(state(services, 1, RANGES));
    const changed = await sent(nft, backend, state(services, 2, ["198.51.100.0/24", "2001:db8:1::/112"]));
    assert.equal(changed.texts.length, 1);
    assert.deepEqual(
      changed.texts[0]!.split("\n").filter((l) => l !== ""),
      ["flush set ip kpng service-cidrs", "add element ip kpng service-cidrs { 198.51.100.0/24 }"],
    );
    assert.deepEqual(keys(nft.elements("ip", "kpng", "service-cidrs")), ["198.51.100.0/24"]);
    const same = await sent(nft, backend, state(services, 3, ["198.51.100.0/24", "2001:db8:1::/112"]));
    assert.equal(same.texts.length, 0);
    const none = await sent(nft, backend, state(services, 4, []));
    assert.deepEqual(keys(nft.elements("ip", "kpng", "service-cidrs")), []);
    assert.deepEqual(keys(nft.elements("ip6", "kpng", "service-cidrs")), []);
    assert.equal(none.texts.length, 2);
  });

  test("a restarted backend rewrites the ranges of the table it adopts", async () => {
    const { nft, backend } = setup();
    await backend.sync(state([service()], 1, RANGES));
    const restarted = new NftBackend({ runner: nft, tables: [V4, V6], log: silentLogger });
    await restarted.sync(state([service()], 1, ["203.0.113.0/24"]));
    assert.deepEqual(keys(nft.elements("ip", "kpng", "service-cidrs")), ["203.0.113.0/24"]);
    assert.deepEqual(keys(nft.elements("ip6", "kpng", "service-cidrs")), []);
  });
});
