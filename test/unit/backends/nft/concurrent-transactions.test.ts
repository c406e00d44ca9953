// A large sync applies its element changes several transactions at once (they commute), and
// everything else alone and in order. Checked with a runner that lets calls overlap (each settles
// on a later turn of the event loop) and applies them to the in-memory nft as they finish.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { NftBackend } from "../../../../src/backends/nft/backend.ts";
import { NftError, type NftListing, type NftRunner } from "../../../../src/backends/nft/runner.ts";
import type { LocalState } from "../../../../src/model/local.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { registry } from "../../../../src/observability/metrics.ts";
import { capturingLogger } from "../../../support/capturing-logger.ts";
import { FakeNft } from "../../../support/fake-nft.ts";
import { manyServices, state, V4 } from "./fixtures.ts";

const CHUNK = 300;

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
const onlyElements = (text: string) =>
  text.split("\n").every((l) => l === "" || /^(add|delete) element /.test(l));

interface Call {
  readonly text: string;
  readonly concurrently: boolean;
  /** Whether the one-line form for `nft -i` came with it. */
  readonly withLine: boolean;
  /** Other calls in flight when this one started. */
  readonly beside: number;
}

class OverlappingNft implements NftRunner {
  readonly nft = new FakeNft();
  readonly calls: Call[] = [];
  inFlight = 0;
  maxInFlight = 0;
  /** Failures injected: `alone` is whether no other call is in flight. */
  fails: (text: string, alone: boolean) => boolean = () => false;

  run(text: string, line?: string): Promise<void> {
    return this.#call(text, false, line !== undefined);
  }

  runConcurrently(text: string): Promise<void> {
    return this.#call(text, true, false);
  }

  async #call(text: string, concurrently: boolean, withLine: boolean): Promise<void> {
    this.calls.push({ text, concurrently, withLine, beside: this.inFlight });
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      // Settles a few turns later, so the caller can start others meanwhile.
      for (let i = 0; i < 3; i++) await turn();
      if (this.fails(text, this.inFlight === 1)) throw new NftError("nft -f failed: injected", "injected");
      await this.nft.run(text);
    } finally {
      this.inFlight--;
    }
  }

  check(text: string): Promise<void> {
    return this.nft.check(text);
  }

  list(family: "ip" | "ip6", table: string, what: NftListing): Promise<Buffer | undefined> {
    return this.nft.list(family, table, what);
  }
}

function backendOn(
  runner: NftRunner,
  concurrentTransactions = 3,
  log = silentLogger,
  now?: () => number,
): NftBackend {
  return new NftBackend({
    runner,
    tables: [V4],
    log,
    maxStatementsPerTransaction: CHUNK,
    concurrentTransactions,
    now,
  });
}

/** What a sync of `cluster` leaves when every transaction is applied alone, in order. */
async function sequentialDump(cluster: LocalState, anyGeneration = false): Promise<string> {
  const nft = new FakeNft();
  await new NftBackend({
    runner: nft,
    tables: [V4],
    log: silentLogger,
    maxStatementsPerTransaction: CHUNK,
  }).sync(cluster);
  return anyGeneration ? nft.dumpAnyGeneration() : nft.dump();
}

describe("element changes in flight together", () => {
  test("a cold start runs its element transactions up to the limit at once, the rest alone, and ends as an ordered one", async () => {
    const cluster = state(manyServices(400));
    const runner = new OverlappingNft();
    const report = await backendOn(runner, 3).sync(cluster);
    assert.equal(report.transactions, runner.calls.length);
    assert.equal(runner.maxInFlight, 3, "three element transactions were in flight at once");
    const concurrent = runner.calls.filter((c) => c.concurrently);
    assert.ok(concurrent.length >= 3, `${concurrent.length} transactions ran beside others`);
    for (const c of runner.calls) {
      if (c.concurrently) assert.ok(onlyElements(c.text), "only element changes run beside others");
      else
        assert.equal(
          c.beside,
          0,
          `a transaction that must run alone started beside others:\n${c.text.slice(0, 200)}`,
        );
    }
    assert.equal(runner.nft.dump(), await sequentialDump(cluster));
  });

  test("a restart's endpoint maps are all applied before the first dispatch element moves to them", async () => {
    const cluster = state(manyServices(800));
    const runner = new OverlappingNft();
    await backendOn(runner, 3).sync(cluster);
    const before = runner.calls.length;
    // A restarted kpng: the other generation's endpoints, then the dispatch elements moved over.
    const restarted = backendOn(runner, 3);
    const settled: { text: string; end: number }[] = [];
    const started: { text: string; at: number }[] = [];
    let clock = 0;
    const run = runner.runConcurrently.bind(runner);
    const plain = runner.run.bind(runner);
    const traced = async (call: () => Promise<void>, text: string) => {
      started.push({ text, at: clock++ });
      await call();
      settled.push({ text, end: clock++ });
    };
    runner.runConcurrently = (text) => traced(() => run(text), text);
    runner.run = (text, line) => traced(() => plain(text, line), text);
    await restarted.sync(cluster);
    const endpoints = settled.filter((c) => c.text.includes("add element ip kpng endpoints-tcp-g1"));
    const dispatch = started.filter((c) => c.text.includes("element ip kpng service-ips"));
    assert.ok(endpoints.length >= 3 && dispatch.length >= 2, `${endpoints.length} / ${dispatch.length}`);
    assert.ok(
      runner.calls.slice(before).some((c) => c.concurrently && c.beside > 0),
      "some ran beside others",
    );
    const lastEndpoints = Math.max(...endpoints.map((c) => c.end));
    const firstDispatch = Math.min(...dispatch.map((c) => c.at));
    assert.ok(
      lastEndpoints < firstDispatch,
      `endpoints settled at ${lastEndpoints}, dispatch started at ${firstDispatch}`,
    );
  });

  test("the limit is kept, and with a limit of one nothing overlaps", async () => {
    const cluster = state(manyServices(400));
    const two = new OverlappingNft();
    await backendOn(two, 2).sync(cluster);
    assert.equal(two.maxInFlight, 2);
    const one = new OverlappingNft();
    await backendOn(one, 1).sync(cluster);
    assert.equal(one.maxInFlight, 1);
    assert.ok(one.calls.every((c) => !c.concurrently));
    assert.equal(one.nft.dump(), two.nft.dump());
  });

  test("a change of one transaction takes the ordered path, with its line for `nft -i`", async () => {
    const services = manyServices(400);
    const runner = new OverlappingNft();
    const backend = backendOn(runner, 3);
    await backend.sync(state(services));
    const before = runner.calls.length;
    const moved = services.map((s, i) =>
      i === 7 ? { ...s, sessionAffinitySeconds: s.sessionAffinitySeconds === 0 ? 30 : 0 } : s,
    );
    await backend.sync(state(moved, 2));
    const change = runner.calls.slice(before);
    assert.ok(change.length >= 1);
    assert.ok(change.every((c) => !c.concurrently && c.withLine && c.beside === 0));
    assert.equal(runner.nft.dump(), await sequentialDump(state(moved, 2)));
  });

  test("a transaction that fails only beside others is applied again alone, and the sync succeeds", async () => {
    const cluster = state(manyServices(400));
    const runner = new OverlappingNft();
    const failed = new Set<string>();
    runner.fails = (text, alone) => {
      if (alone || !onlyElements(text) || failed.size === 2) return false;
      failed.add(text);
      return true;
    };
    const retries = async () =>
      (await registry.getMetricsAsJSON())
        .find((m) => m.name === "kpng_nftables_transaction_retries_total")
        ?.values.find((v) => v.labels.ip_family === "IPv4")?.value ?? 0;
    const before = await retries();
    const { log, lines } = capturingLogger();
    await backendOn(runner, 3, log).sync(cluster);
    assert.equal(failed.size, 2);
    assert.equal((await retries()) - before, 2, "each retry counted");
    const warned = lines.filter((l) => String(l.msg).includes("failed beside others"));
    assert.equal(warned.length, 2, "each retry logged");
    assert.match(String(warned[0]?.err), /injected/);
    for (const text of failed) {
      const tries = runner.calls.filter((c) => c.text === text);
      assert.deepEqual(
        tries.map((c) => c.concurrently),
        [true, false],
        "tried beside others, then alone",
      );
    }
    assert.equal(runner.nft.dump(), await sequentialDump(cluster));
  });

  test("a transaction that fails alone too fails the sync; nothing new starts after it; the next sync converges", async () => {
    const cluster = state(manyServices(400));
    const runner = new OverlappingNft();
    let now = 1_000_000;
    const backend = backendOn(runner, 3, silentLogger, () => now);
    let elementTransactions = 0;
    const bad = new Set<string>();
    runner.fails = (text) => {
      if (!onlyElements(text)) return false;
      if (bad.size === 0 && ++elementTransactions === 4) bad.add(text);
      return bad.has(text);
    };
    await assert.rejects(backend.sync(cluster), /nft transaction failed/);
    const [failed] = [...bad];
    assert.ok(failed !== undefined);
    const tries = runner.calls.filter((c) => c.text === failed);
    assert.equal(tries.length, 2, "tried beside others, then alone");
    assert.equal(tries[1]?.concurrently, false);
    const firstTry = runner.calls.findIndex((c) => c.text === failed);
    // At most the transactions already in flight or rendered when the failure was seen follow it.
    assert.ok(
      runner.calls.length - firstTry <= 4,
      `${runner.calls.length - firstTry} calls from the failed one on`,
    );
    assert.equal(backend.needsFullSync("ip"), true);

    bad.clear();
    elementTransactions = -1_000_000;
    // The resync writes the other generation of endpoint maps; the old one goes a second later.
    await backend.sync(cluster);
    now += 1000;
    await backend.sync(cluster);
    assert.equal(runner.nft.dumpAnyGeneration(), await sequentialDump(cluster, true));
  });
});
