// Fault: with a conflicting object in `ip kpng`, `ip6 kpng` was never created and IPv6 changes
// never applied: the families were synced in one sequence that stopped at the first failure.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { NftBackend } from "../../src/backends/nft/backend.ts";
import { silentLogger } from "../../src/observability/log.ts";
import { FakeNft } from "../support/fake-nft.ts";
import { ep, port, service, state, V4, V6 } from "../unit/backends/nft/fixtures.ts";
import { eventually, ManualFeed } from "./support.ts";

const v6Service = (name: string, ip: string) =>
  service({
    name,
    clusterIPs: [ip],
    ports: [port({ internalEndpoints: [ep("2001:db8:1::2")], endpointFamilies: ["IPv6"] })],
  });

describe("fault: one family's failure holds the other", () => {
  test("sync() programs ip6 although every ip transaction fails", async () => {
    const nft = new FakeNft();
    nft.failWhile(
      (t) => / ip kpng\b/.test(t),
      "/dev/stdin:1:1-20: Error: Could not process rule: File exists",
    );
    const backend = new NftBackend({ runner: nft, tables: [V4, V6], log: silentLogger });
    await assert.rejects(backend.sync(state([service(), v6Service("web6", "2001:db8::10")])));
    assert.equal(nft.hasTable("ip", "kpng"), false);
    assert.ok(nft.hasTable("ip6", "kpng"), "ip6 table created");
    assert.equal(nft.elements("ip6", "kpng", "service-ips")?.size, 1);
    const health = backend.health();
    assert.deepEqual(
      health.families.map((f) => [f.family, f.programmed, f.failures]),
      [
        ["ip", false, 1],
        ["ip6", true, 0],
      ],
    );
  });

  test("while ip keeps failing, the loop applies each IPv6 change without waiting for ip's backoff", {
    timeout: 15_000,
  }, async () => {
    const nft = new FakeNft();
    nft.failWhile((t) => / ip kpng\b/.test(t));
    const backend = new NftBackend({ runner: nft, tables: [V4, V6], log: silentLogger });
    const feed = new ManualFeed();
    const ac = new AbortController();
    const running = backend.run(feed, ac.signal);
    try {
      feed.push(state([v6Service("a", "2001:db8::10")]));
      await eventually(
        () => nft.elements("ip6", "kpng", "service-ips")?.size === 1,
        "the first IPv6 service",
        2000,
      );
      // Three more changes inside ip's first retry delays (1 s, 2 s): each must apply promptly.
      for (let i = 2; i <= 4; i++) {
        const services = Array.from({ length: i }, (_, k) => v6Service(`s${k}`, `2001:db8::${k + 10}`));
        feed.push(state(services, i));
        await eventually(
          () => nft.elements("ip6", "kpng", "service-ips")?.size === i,
          `IPv6 change ${i}`,
          500,
        );
      }
      assert.equal(backend.health().families[0]?.programmed, false);
    } finally {
      ac.abort();
      await running;
    }
  });
});
