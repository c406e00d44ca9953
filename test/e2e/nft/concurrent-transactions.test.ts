// A large sync with several `nft -f` of element changes in flight at once, against the real nft:
// the table it leaves is the one the same sync leaves with every transaction applied alone.

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { NftBackend } from "../../../src/backends/nft/backend.ts";
import { InteractiveNftRunner } from "../../../src/backends/nft/interactive-runner.ts";
import { ExecNftRunner, type NftListing, type NftRunner } from "../../../src/backends/nft/runner.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { Netns, netnsSkipReason } from "../../support/netns.ts";
import { manyServices, state, V4 } from "../../unit/backends/nft/fixtures.ts";

const skip = await netnsSkipReason();

/** Counts the transactions that overlapped another one. */
class OverlapCounter implements NftRunner {
  readonly #inner: InteractiveNftRunner;
  inFlight = 0;
  maxInFlight = 0;
  constructor(inner: InteractiveNftRunner) {
    this.#inner = inner;
  }
  async #counted(apply: () => Promise<void>): Promise<void> {
    this.maxInFlight = Math.max(this.maxInFlight, ++this.inFlight);
    try {
      await apply();
    } finally {
      this.inFlight--;
    }
  }
  run(text: string, line?: string): Promise<void> {
    return this.#counted(() => this.#inner.run(text, line));
  }
  runConcurrently(text: string): Promise<void> {
    return this.#counted(() => this.#inner.runConcurrently(text));
  }
  check(text: string): Promise<void> {
    return this.#inner.check(text);
  }
  list(family: "ip" | "ip6", table: string, what: NftListing): Promise<Buffer | undefined> {
    return this.#inner.list(family, table, what);
  }
  close(): void {
    this.#inner.close();
  }
}

describe("nft: element transactions applied at once", { skip }, () => {
  const namespaces: Netns[] = [];
  const runners: OverlapCounter[] = [];

  async function syncIn(
    concurrentTransactions: number,
    services: number,
  ): Promise<{ table: string; runner: OverlapCounter }> {
    const ns = await Netns.create();
    namespaces.push(ns);
    const command = ["ip", "netns", "exec", ns.name, "nft"];
    const runner = new OverlapCounter(
      new InteractiveNftRunner({ command, fallback: new ExecNftRunner(command) }),
    );
    runners.push(runner);
    const backend = new NftBackend({
      runner,
      tables: [V4],
      log: silentLogger,
      maxStatementsPerTransaction: 100,
      concurrentTransactions,
    });
    const report = await backend.sync(state(manyServices(services)));
    assert.ok(report.transactions > 10, `${report.transactions} transactions`);
    const listing = await ns.exec(["nft", "list", "table", "ip", "kpng"]);
    return { table: listing.stdout, runner };
  }

  after(async () => {
    for (const r of runners) r.close();
    for (const ns of namespaces) await ns.destroy();
  });

  test("three at once leave the table one at a time leaves", async () => {
    const together = await syncIn(3, 600);
    const alone = await syncIn(1, 600);
    assert.ok(together.runner.maxInFlight > 1, "transactions overlapped");
    assert.equal(alone.runner.maxInFlight, 1);
    assert.ok(together.table.length > 10_000, together.table.slice(0, 200));
    assert.equal(together.table, alone.table);
  });
});
