// A cold start's memory beyond the mirror: the plan's units, their element keys and the rendered
// text exist for the transaction being applied and the one rendered meanwhile, never for the
// whole table. Measured as the live heap (after a full collection) at each transaction nft is
// given, against the heap once the sync is done, when only the mirror and the state are left.

import assert from "node:assert/strict";
import { test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { NftBackend } from "../../../../src/backends/nft/backend.ts";
import type { NftRunner } from "../../../../src/backends/nft/runner.ts";
import { PHASE, packTransactions, type Unit } from "../../../../src/backends/nft/transaction.ts";
import type { LocalState } from "../../../../src/model/local.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { ep, manyServices, port, state, V4 } from "./fixtures.ts";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const MiB = 1024 * 1024;
const CHUNK = 10_000;

/** Applies nothing; at each transaction, collects garbage and notes the live heap. */
class HeapWatchingNft implements NftRunner {
  peakHeap = 0;
  transactions = 0;
  maxBytes = 0;
  async run(text: string): Promise<void> {
    gc();
    this.peakHeap = Math.max(this.peakHeap, process.memoryUsage().heapUsed);
    this.transactions++;
    this.maxBytes = Math.max(this.maxBytes, text.length);
  }
  async check(): Promise<void> {}
  async list(): Promise<Buffer | undefined> {
    return undefined;
  }
}

/** `n` ClusterIP services with ten endpoints each, as in the 100k × 10 benchmarks. */
function cluster(n: number): LocalState {
  return state(
    manyServices(n).map((svc, i) => {
      const ips = Array.from({ length: 10 }, (_, k) => ep(`10.${100 + k}.${(i >> 8) & 255}.${i & 255}`));
      return { ...svc, ports: [port({ internalEndpoints: ips })] };
    }),
  );
}

/** The heap a cold start of `cluster` holds beyond what stays once it is done. */
async function coldStartExtra(cluster: LocalState): Promise<{ extra: number; runner: HeapWatchingNft }> {
  const runner = new HeapWatchingNft();
  const backend = new NftBackend({
    runner,
    tables: [V4],
    log: silentLogger,
    maxStatementsPerTransaction: CHUNK,
  });
  const report = await backend.sync(cluster);
  assert.equal(report.transactions, runner.transactions);
  gc();
  const after = process.memoryUsage().heapUsed;
  // The backend (and its mirror) must still be alive at the measurement above.
  assert.equal(backend.needsFullSync("ip"), false);
  return { extra: runner.peakHeap - after, runner };
}

test("a cold start holds about one transaction's units and text at a time, whatever the cluster size", async () => {
  const small = await coldStartExtra(cluster(2_000));
  const large = await coldStartExtra(cluster(10_000));
  assert.ok(large.runner.transactions >= 4 * small.runner.transactions, "more transactions");
  const mib = (n: number) => `${(n / MiB).toFixed(2)} MiB`;
  const seen = `extra heap: 2k ${mib(small.extra)}, 10k ${mib(large.extra)}; largest transaction ${mib(large.runner.maxBytes)}`;
  // Before, every unit of the plan and every applied transaction's text stayed alive to the end
  // (2.0 MiB at 2k, 10.5 MiB at 10k: about 1.1 KB per service of ten endpoints).
  assert.ok(large.extra < small.extra + 1 * MiB, `grows with the cluster: ${seen}`);
  assert.ok(large.extra < 4 * MiB, seen);
});

test("packing takes the next unit only when a transaction is asked for", () => {
  let taken = 0;
  function* units(): Generator<Unit> {
    for (let i = 0; i < 1000; i++) {
      taken++;
      yield { phase: PHASE.elements, ops: [], elements: [{ op: "add", set: "s", key: `${i}`, value: "" }] };
    }
  }
  const txs = packTransactions(units(), "ip", "kpng", 100);
  assert.equal(taken, 0, "nothing before the first transaction is asked for");
  for (let k = 1; k <= 10; k++) {
    assert.ok(txs.next().value);
    // The k transactions given out, plus the one unit that did not fit in the last of them.
    assert.equal(taken, Math.min(1000, 100 * k + 1), `after transaction ${k}`);
  }
  assert.equal(txs.next().done, true);
});
