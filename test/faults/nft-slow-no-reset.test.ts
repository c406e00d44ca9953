// Fault: nft transactions that ran past their deadline three times in a row (a loaded node, a
// large table) made the sync loop delete kpng's table and write it anew, so every Service went
// dark for as long as the rewrite took (half a minute at 100k Services), although the table was
// fine and only nft was slow. Now only refusals (nft answered that the rules are wrong) lead to
// that reset; a deadline, a shortage of memory or an nft that cannot start are retried with the
// table left serving what it holds.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { NftBackend } from "../../src/backends/nft/backend.ts";
import { registry } from "../../src/observability/metrics.ts";
import { FakeNft } from "../support/fake-nft.ts";
import { ep, port, service, state, V4 } from "../unit/backends/nft/fixtures.ts";
import { capturingLogger, eventually, ManualFeed } from "./support.ts";

async function failures(): Promise<number> {
  const metric = await registry.getSingleMetric("kpng_sync_failures_total")?.get();
  return metric?.values.find((v) => v.labels.backend === "nftables" && v.labels.family === "ip")?.value ?? 0;
}

const moved = () =>
  state([service({ ports: [port({ internalEndpoints: [ep("198.51.100.2"), ep("198.51.100.4")] })] })], 2);

describe("fault: nft keeps running past its deadline", () => {
  for (const [what, how, stderr] of [
    ["a deadline", "deadline", ""],
    ["a shortage of memory", "refused", "Error: Could not process rule: Cannot allocate memory"],
  ] as const) {
    test(`after ${what} four times in a row the table still serves the last good rules; the change lands once nft recovers`, {
      timeout: 20_000,
    }, async () => {
      const nft = new FakeNft();
      const { log, lines } = capturingLogger();
      const backend = new NftBackend({ runner: nft, tables: [V4], log, syncPeriodMs: 1000 });
      const feed = new ManualFeed(state([service()]));
      const ac = new AbortController();
      const running = backend.run(feed, ac.signal);
      try {
        await eventually(() => backend.health().healthy, "the first ruleset");
        const before = await failures();
        const recover = nft.failWhile((text) => !text.startsWith("delete table"), stderr, how);
        feed.push(moved());
        // Backoff of 1 s each (the sync period caps it): four failures in about four seconds.
        await eventually(() => (backend.health().families[0]?.failures ?? 0) >= 4, "four failures", 15_000);
        assert.equal(nft.transactions.filter((t) => t.startsWith("delete table")).length, 0, "never deleted");
        assert.ok(nft.hasTable("ip", "kpng"));
        assert.ok(nft.dump().includes("198.51.100.3"), "the last good endpoints still serve");
        assert.ok((await failures()) >= before + 4, "each failure counted");
        assert.ok(
          lines.some((l) => l.level === 50),
          "logged",
        );
        assert.ok(!lines.some((l) => /writing everything kpng owns in this family anew/.test(String(l.msg))));
        recover();
        await eventually(() => backend.health().healthy, "in line again", 5000);
        assert.ok(nft.dump().includes("198.51.100.4"), "the change applied");
        assert.equal(nft.transactions.filter((t) => t.startsWith("delete table")).length, 0);
      } finally {
        ac.abort();
        await running;
      }
    });
  }
});
