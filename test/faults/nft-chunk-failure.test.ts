// Fault: a cold start streamed in chunks, one of which nft rejects midway. What the kernel holds
// must be whole chunks only (each one a consistent table), nothing after the failed chunk may be
// sent, the failure must be reported, and the next sync must converge to what a clean start gives.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { NftBackend } from "../../src/backends/nft/backend.ts";
import type { LocalState } from "../../src/model/local.ts";
import { silentLogger } from "../../src/observability/log.ts";
import { FakeNft } from "../support/fake-nft.ts";
import { manyServices, state, V4 } from "../unit/backends/nft/fixtures.ts";

const CHUNK = 300;

function backendOn(nft: FakeNft, now?: () => number): NftBackend {
  return new NftBackend({
    runner: nft,
    tables: [V4],
    log: silentLogger,
    maxStatementsPerTransaction: CHUNK,
    now,
  });
}

/**
 * Syncs until the table is in line and the objects it retired are deleted (a second later), and
 * compares it with a clean start's: the same but for the generation of the endpoint maps, which
 * a resync from a listing writes anew (docs/nft.md, "Restart").
 */
async function convergesLikeACleanStart(
  nft: FakeNft,
  backend: NftBackend,
  cluster: LocalState,
  clock: { now: number },
) {
  await backend.sync(cluster);
  clock.now += 1000;
  await backend.sync(cluster);
  const clean = new FakeNft();
  await backendOn(clean).sync(cluster);
  assert.equal(nft.dumpAnyGeneration(), clean.dumpAnyGeneration());
}

describe("fault: a chunk of a streamed cold start fails", () => {
  test("nothing after the failed chunk is sent; the next sync converges from a listing", async () => {
    const cluster = state(manyServices(400));
    const nft = new FakeNft();
    const clock = { now: 1_000_000 };
    const backend = backendOn(nft, () => clock.now);
    // The fourth transaction of the cold start fails; the fake applies a transaction whole or not at all.
    let sent = 0;
    nft.failNext(() => ++sent === 4);
    await assert.rejects(backend.sync(cluster), /nft transaction failed/);
    assert.equal(nft.transactions.length, 4, "no chunk is sent after the one that failed");
    assert.equal(backend.needsFullSync("ip"), true, "the mirror of a failed table is not trusted");

    // What the three committed chunks left is consistent: every chain a rule or a map element
    // jumps to exists.
    const partial = nft.dump();
    const chains = new Set(nft.chainNames("ip", "kpng"));
    const targets = [...partial.matchAll(/(?:goto|jump) ([\w-]+)/g)].map((m) => m[1]!);
    assert.ok(targets.length > 0, partial.slice(0, 500));
    for (const target of targets) assert.ok(chains.has(target), `${target} is referenced but missing`);

    await convergesLikeACleanStart(nft, backend, cluster, clock);
  });

  test("a chunk failing on every try leaves the last good chunks, and each try stops there", async () => {
    const cluster = state(manyServices(400));
    const nft = new FakeNft();
    const clock = { now: 1_000_000 };
    const backend = backendOn(nft, () => clock.now);
    let sent = 0;
    const stop = nft.failWhile(() => ++sent % 3 === 2, "Error: Could not process rule: No such file");
    await assert.rejects(backend.sync(cluster));
    await assert.rejects(backend.sync(cluster));
    assert.ok(nft.transactions.length <= 6, `sent ${nft.transactions.length} transactions in two tries`);
    stop();
    await convergesLikeACleanStart(nft, backend, cluster, clock);
  });
});
