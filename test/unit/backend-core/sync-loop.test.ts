import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, mock, test } from "node:test";
import {
  type BackendFamily,
  FamilySyncError,
  RESET_AFTER_FAILURES,
  SyncLoop,
} from "../../../src/backend-core/sync-loop.ts";
import type { IPFamily } from "../../../src/model/kube.ts";
import type { LocalState } from "../../../src/model/local.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { registry } from "../../../src/observability/metrics.ts";
import { gate, settle } from "../../support/settle.ts";
import { service, state } from "../backends/nft/fixtures.ts";

/**
 * A family that records what it is asked; `fail` makes apply throw (a refusal that a reset may
 * fix, or with `failure`, another kind), `hang` never return.
 */
class FakeFamily implements BackendFamily {
  readonly family: string;
  readonly ipFamilies: readonly IPFamily[];
  readonly applied: { revision: number; periodic: boolean; full: boolean }[] = [];
  resets = 0;
  fail = false;
  failure: "refused" | "timed out" = "refused";
  hang = false;
  #known = false;
  constructor(family: string) {
    this.family = family;
    this.ipFamilies = [family === "b" ? "IPv6" : "IPv4"];
  }
  async apply(s: LocalState, periodic: boolean) {
    if (this.hang) await new Promise(() => {});
    if (this.fail)
      throw new FamilySyncError(`${this.family} ${this.failure}`, { resettable: this.failure === "refused" });
    const full = !this.#known || periodic;
    this.#known = true;
    this.applied.push({ revision: s.revision, periodic, full });
    return { full, transactions: 1, bytes: 0 };
  }
  forget() {
    this.#known = false;
  }
  reset() {
    this.resets++;
  }
  revisions() {
    return this.applied.map((a) => a.revision);
  }
}

class ManualFeed {
  listener: ((s: LocalState) => void) | undefined;
  /** What the loop reported programmed: revision and families. */
  readonly reports: [number, readonly IPFamily[]][] = [];
  programmed(s: LocalState, families: readonly IPFamily[]) {
    this.reports.push([s.revision, families]);
  }
  subscribe(l: (s: LocalState) => void) {
    this.listener = l;
    return () => {
      this.listener = undefined;
    };
  }
  push(revision: number) {
    this.listener?.(state([service()], revision));
  }
}

/** kpng_rules_repairs_total of the test backend's `family`. */
async function repairs(family: string): Promise<number> {
  const values = (await registry.getSingleMetric("kpng_rules_repairs_total")?.get())?.values ?? [];
  return values.find((v) => v.labels.backend === "test" && v.labels.family === family)?.value ?? 0;
}

/** kpng_sync_resets_total of the test backend's `family`. */
async function resets(family: string): Promise<number> {
  const values = (await registry.getSingleMetric("kpng_sync_resets_total")?.get())?.values ?? [];
  return values.find((v) => v.labels.backend === "test" && v.labels.family === family)?.value ?? 0;
}

async function advance(ms: number): Promise<void> {
  await settle();
  mock.timers.tick(ms);
  await settle();
}

/** `probeIntervalMs` of an hour leaves probing to the periodic resync. */
function start(
  families: FakeFamily[],
  options: { probe?: (family: string) => Promise<boolean>; probeIntervalMs?: number } = {},
) {
  const loop = new SyncLoop({
    backend: "test",
    families,
    log: silentLogger,
    syncPeriodMs: 30_000,
    ...(options.probe
      ? { probe: { intact: options.probe }, probeIntervalMs: options.probeIntervalMs ?? 1000 }
      : {}),
  });
  const feed = new ManualFeed();
  const ac = new AbortController();
  const running = loop.run(feed, ac.signal);
  return {
    loop,
    feed,
    stop: async () => {
      ac.abort();
      await running;
    },
  };
}

describe("the shared sync loop", () => {
  beforeEach(() => mock.timers.enable({ apis: ["setTimeout", "Date"], now: 1_000_000 }));
  afterEach(() => mock.timers.reset());

  test("states that arrive during a sync are coalesced: only the latest is applied next", async () => {
    const a = new FakeFamily("a");
    const { feed, stop } = start([a]);
    feed.push(1);
    feed.push(2);
    feed.push(3);
    await settle();
    assert.deepEqual(a.revisions(), [3]);
    await stop();
  });

  test("a failing family is retried with backoff (1 s, 2 s) while the other follows every change", async () => {
    const a = new FakeFamily("a");
    const b = new FakeFamily("b");
    const { loop, feed, stop } = start([a, b]);
    a.fail = true;
    feed.push(1);
    await settle();
    feed.push(2);
    await settle();
    assert.deepEqual(b.revisions(), [1, 2], "b follows at once");
    assert.deepEqual(
      feed.reports,
      [
        [1, ["IPv6"]],
        [2, ["IPv6"]],
      ],
      "the feed hears which families hold each state",
    );
    assert.equal(loop.health().families[0]?.failures, 1);
    await advance(999);
    assert.equal(loop.health().families[0]?.failures, 1, "not retried before 1 s");
    await advance(1);
    assert.equal(loop.health().families[0]?.failures, 2, "retried at 1 s");
    a.fail = false;
    await advance(1999);
    assert.deepEqual(a.revisions(), []);
    await advance(1);
    assert.deepEqual(a.applied, [{ revision: 2, periodic: false, full: true }], "the latest state, in full");
    assert.deepEqual(feed.reports.at(-1), [2, ["IPv4", "IPv6"]]);
    assert.equal(loop.health().healthy, true);
    await stop();
  });

  test("with nothing new, every family is resynced once per sync period", async () => {
    const a = new FakeFamily("a");
    const { feed, stop } = start([a]);
    feed.push(1);
    await advance(29_999);
    assert.equal(a.applied.length, 1);
    await advance(1);
    assert.deepEqual(a.applied.at(-1), { revision: 1, periodic: true, full: true });
    await stop();
  });

  test("the probe: a lost family is rewritten in full at once; a failing probe is no loss", async () => {
    const a = new FakeFamily("a");
    let answer: boolean | Error = true;
    const { feed, stop } = start([a], {
      probe: async () => {
        if (answer instanceof Error) throw answer;
        return answer;
      },
    });
    feed.push(1);
    await advance(1000);
    assert.equal(a.applied.length, 1, "intact: no resync");
    answer = new Error("timeout");
    await advance(1000);
    assert.equal(a.applied.length, 1, "cannot tell: no resync");
    answer = false;
    await advance(1000);
    assert.deepEqual(a.applied.at(-1), { revision: 1, periodic: false, full: true });
    await stop();
  });

  test("a state that arrives while the probe runs is synced at once, not after the probe", async () => {
    const a = new FakeFamily("a");
    let probing = gate();
    let answer = true;
    let probes = 0;
    const { feed, stop } = start([a], {
      probe: async () => {
        probes++;
        await probing.promise;
        return answer;
      },
    });
    feed.push(1);
    await advance(1000);
    assert.equal(probes, 1, "the probe is running and has not answered");
    feed.push(2);
    await settle();
    assert.deepEqual(a.revisions(), [1, 2], "the change did not wait for the probe");
    probing.open();
    await settle();
    assert.deepEqual(a.revisions(), [1, 2], "intact: nothing more");
    // A probe that saw a sync start meanwhile may have seen the rules between two transactions:
    // its verdict is dropped, and the next probe decides.
    probing = gate();
    answer = false;
    await advance(1000);
    assert.equal(probes, 2);
    feed.push(3);
    await settle();
    probing.open();
    await settle();
    assert.deepEqual(a.applied.at(-1), { revision: 3, periodic: false, full: false }, "no rewrite yet");
    await advance(1000);
    assert.equal(probes, 3);
    assert.deepEqual(a.applied.at(-1), { revision: 3, periodic: false, full: true }, "lost: rewritten");
    await stop();
  });

  test("rules flushed while a probe runs and a change is synced: one repair, rewritten at once", async () => {
    // The flush is seen twice: by a probe that a sync overtook (its verdict is dropped) and by
    // the sync itself, which fails on the missing table. The failed sync is the repair.
    const a = new FakeFamily("a");
    const probing = gate();
    let flushed = false;
    const { feed, stop } = start([a], {
      probe: async () => {
        await probing.promise;
        return !flushed;
      },
    });
    const before = await repairs("a");
    feed.push(1);
    await advance(1000);
    flushed = true;
    a.fail = true;
    feed.push(2);
    await settle();
    assert.deepEqual(a.revisions(), [1], "the change failed on the flushed table");
    a.fail = false;
    probing.open();
    await settle();
    assert.equal(await repairs("a"), before + 1, "counted as a repair");
    assert.deepEqual(
      a.applied.at(-1),
      { revision: 2, periodic: false, full: true },
      "rewritten without a backoff",
    );
    await stop();
  });

  test("a sync that fails over intact rules is an ordinary failure: no repair, retried after 1 s", async () => {
    const a = new FakeFamily("a");
    const { loop, feed, stop } = start([a], { probe: async () => true });
    const before = await repairs("a");
    feed.push(1);
    await settle();
    a.fail = true;
    feed.push(2);
    await settle();
    assert.equal(await repairs("a"), before);
    a.fail = false;
    await advance(999);
    assert.deepEqual(a.revisions(), [1]);
    assert.equal(loop.health().families[0]?.failures, 1);
    await advance(1);
    assert.deepEqual(a.revisions(), [1, 2]);
    await stop();
  });

  test("a state that arrives while the periodic resync waits for a probe's answer is synced at once", async () => {
    const a = new FakeFamily("a");
    const held = gate();
    let hold = false;
    const { feed, stop } = start([a], {
      probe: async () => {
        if (hold) await held.promise;
        return true;
      },
    });
    feed.push(1);
    await settle();
    for (let i = 0; i < 28; i++) await advance(1000);
    hold = true;
    await advance(1000);
    await advance(1000);
    assert.deepEqual(a.revisions(), [1], "the period is due; the probe started before it has not answered");
    feed.push(2);
    await settle();
    assert.deepEqual(a.revisions(), [1, 2], "the change did not wait for the probe");
    held.open();
    await settle();
    await stop();
  });

  test("a state that arrives while the periodic resync's own check runs is synced at once", async () => {
    const a = new FakeFamily("a");
    const checking = gate();
    let checks = 0;
    const { feed, stop } = start([a], {
      probeIntervalMs: 3_600_000,
      probe: async () => {
        checks++;
        await checking.promise;
        return true;
      },
    });
    feed.push(1);
    await settle();
    await advance(30_000);
    assert.equal(checks, 1, "the period's check runs and has not answered");
    feed.push(2);
    await settle();
    assert.deepEqual(a.revisions(), [1, 2], "the change did not wait for the check");
    checking.open();
    await settle();
    assert.deepEqual(a.revisions(), [1, 2], "intact: confirmed, not rewritten");
    await stop();
  });

  test("a sync that fails while the periodic check runs is retried: the check's answer does not hide it", async () => {
    const a = new FakeFamily("a");
    const b = new FakeFamily("b");
    const checking = gate();
    const { loop, feed, stop } = start([a, b], {
      probeIntervalMs: 3_600_000,
      // a is found intact at once; the check then waits on b.
      probe: async (family) => {
        if (family === "b") await checking.promise;
        return true;
      },
    });
    feed.push(1);
    await settle();
    await advance(30_000);
    a.fail = true;
    feed.push(2);
    await settle();
    checking.open();
    await settle();
    assert.equal(loop.health().families[0]?.failures, 1, "still failing");
    a.fail = false;
    await advance(1000);
    assert.deepEqual(a.applied.at(-1), { revision: 2, periodic: false, full: true }, "retried at 1 s");
    await stop();
  });

  test("with a probe, the periodic resync confirms an intact family instead of rewriting it", async () => {
    const a = new FakeFamily("a");
    const b = new FakeFamily("b");
    let probes = 0;
    const lost = new Set<string>();
    const cannotTell = new Set<string>();
    const { loop, feed, stop } = start([a, b], {
      probeIntervalMs: 3_600_000,
      probe: async (family) => {
        probes++;
        if (cannotTell.has(family)) throw new Error("timeout");
        return !lost.has(family);
      },
    });
    feed.push(1);
    await settle();
    await advance(30_000);
    await advance(30_000);
    assert.equal(a.applied.length, 1, "intact: confirmed, not rewritten");
    assert.equal(b.applied.length, 1);
    assert.equal(probes, 4, "each family probed at each period");
    assert.equal(loop.health().healthy, true);
    cannotTell.add("a");
    lost.add("b");
    await advance(30_000);
    assert.deepEqual(a.applied.at(-1), { revision: 1, periodic: true, full: true }, "cannot tell: rewritten");
    assert.deepEqual(b.applied.at(-1), { revision: 1, periodic: true, full: true }, "lost: rewritten");
    cannotTell.clear();
    lost.clear();
    feed.push(2);
    await settle();
    await advance(30_000);
    assert.deepEqual(a.revisions(), [1, 1, 2], "a new state is applied; the next period only confirms");
    await stop();
  });

  test(`after ${RESET_AFTER_FAILURES} failures in a row the family's own objects are deleted first`, async () => {
    const a = new FakeFamily("a");
    const before = await resets("a");
    const { feed, stop } = start([a]);
    a.fail = true;
    feed.push(1);
    for (let i = 0; i < RESET_AFTER_FAILURES - 1; i++) await advance(30_000);
    assert.equal(a.resets, 0);
    a.fail = false;
    await advance(30_000);
    assert.equal(a.resets, 1);
    assert.equal(a.applied.length, 1);
    assert.equal(await resets("a"), before + 1, "counted");
    await stop();
  });

  test("failures a reset cannot fix (deadlines, a shortage) never delete what serves traffic", async () => {
    const a = new FakeFamily("a");
    const before = await resets("a");
    const { feed, stop } = start([a]);
    a.fail = true;
    a.failure = "timed out";
    feed.push(1);
    for (let i = 0; i < 3 * RESET_AFTER_FAILURES; i++) await advance(30_000);
    assert.equal(a.resets, 0);
    assert.equal(await resets("a"), before);
    a.fail = false;
    await advance(30_000);
    assert.equal(a.resets, 0);
    assert.deepEqual(a.revisions(), [1]);
    await stop();
  });

  test("only refusals in a row count towards a reset: a timeout between them starts the count again", async () => {
    const a = new FakeFamily("a");
    const { feed, stop } = start([a]);
    a.fail = true;
    feed.push(1);
    // The push fails at once, each advance fails once more.
    for (let i = 0; i < RESET_AFTER_FAILURES - 2; i++) await advance(30_000);
    a.failure = "timed out";
    await advance(30_000);
    a.failure = "refused";
    for (let i = 0; i < RESET_AFTER_FAILURES; i++) await advance(30_000);
    assert.equal(a.resets, 0, "a reset comes before the attempt after the refusals");
    await advance(30_000);
    assert.equal(a.resets, 1);
    await stop();
  });

  test("abort does not wait for a hung apply", async () => {
    const a = new FakeFamily("a");
    a.hang = true;
    const { feed, stop } = start([a]);
    feed.push(1);
    await settle();
    await stop();
  });
});
