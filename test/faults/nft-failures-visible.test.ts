// Fault: with nft missing, or the table listing failing at start, kpng programmed nothing and
// logged nothing, forever: the listing threw outside the per-transaction handling.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { NftBackend } from "../../src/backends/nft/backend.ts";
import { ExecNftRunner, NftError } from "../../src/backends/nft/runner.ts";
import { registry } from "../../src/observability/metrics.ts";
import { FakeNft } from "../support/fake-nft.ts";
import { service, state, V4, V6 } from "../unit/backends/nft/fixtures.ts";
import { capturingLogger, eventually } from "./support.ts";

async function listingFailures(family: string): Promise<number> {
  const metric = await registry.getSingleMetric("kpng_sync_failures_total")?.get();
  return (
    metric?.values.find((v) => v.labels.backend === "nftables" && v.labels.family === family)?.value ?? 0
  );
}

describe("fault: nft failures nobody sees", () => {
  test("a missing nft binary is an NftError that names the command", async () => {
    const runner = new ExecNftRunner(["/nonexistent/nft"]);
    await assert.rejects(runner.list("ip", "kpng", { objects: "sets" }), (e: Error) => {
      assert.ok(e instanceof NftError);
      assert.match(e.message, /cannot run \/nonexistent\/nft: .*ENOENT/);
      return true;
    });
  });

  test("a failing listing at start is logged, counted, unhealthy, and retried until it works", {
    timeout: 15_000,
  }, async () => {
    const nft = new FakeNft();
    const restore = nft.failListing("cannot run nft: spawn nft ENOENT");
    const { log, lines } = capturingLogger();
    const backend = new NftBackend({ runner: nft, tables: [V4, V6], log });
    const before = await listingFailures("ip");
    const feed = {
      subscribe(listener: (s: ReturnType<typeof state>) => void) {
        listener(state([service()]));
        return () => {};
      },
    };
    const ac = new AbortController();
    const running = backend.run(feed, ac.signal);
    try {
      await eventually(() => lines.some((l) => l.level === 50), "an error line");
      const error = lines.find((l) => l.level === 50)!;
      assert.match(String(error.error), /cannot read table ip kpng: cannot run nft: spawn nft ENOENT/);
      assert.equal(error.family, "ip");
      assert.ok((await listingFailures("ip")) > before, "counted");
      const health = backend.health();
      assert.equal(health.healthy, false);
      assert.deepEqual(
        health.families.map((f) => [f.family, f.programmed, f.failures > 0]),
        [
          ["ip", false, true],
          ["ip6", false, true],
        ],
      );
      assert.match(health.families[0]?.lastError ?? "", /ENOENT/);
      restore();
      await eventually(() => backend.health().healthy, "healthy after the retry", 5000);
      assert.ok(nft.hasTable("ip", "kpng") && nft.hasTable("ip6", "kpng"));
      assert.ok(lines.some((l) => /in line again/.test(String(l.msg))));
    } finally {
      ac.abort();
      await running;
    }
  });

  test("before the first sync the backend reports itself not yet programmed", () => {
    const backend = new NftBackend({ runner: new FakeNft(), tables: [V4], log: capturingLogger().log });
    assert.deepEqual(backend.health(), {
      healthy: false,
      families: [{ family: "ip", programmed: false, failures: 0 }],
    });
  });
});
