// `kpng <source> … <sink>`: the sink starts while the source reads its first state (a file parsed
// for seconds at 100k Services is time in which a backend loads its programs), waits for the
// store's first sync, and is stopped when the source cannot start, before the source's error is
// reported.

import assert from "node:assert/strict";
import { test } from "node:test";
import type { Invocation } from "../../../src/cli/invocation.ts";
import { runInvocation } from "../../../src/cli/run.ts";
import type { ClusterSource, ClusterView } from "../../../src/model/global.ts";
import type { LocalState, LocalStateFeed } from "../../../src/model/local.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import type { GlobalSinkContext, SourcePlugin } from "../../../src/plugin/contracts.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import { svc } from "../brain/fixtures.ts";

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function sourcePlugin(source: ClusterSource): SourcePlugin {
  return {
    name: "fake",
    description: "fake",
    addOptions: () => {},
    parseOptions: () => ({}),
    create: () => source,
  };
}

/** A source that reads for a turn of the event loop, then holds "web" (or fails with `error`). */
function slowSource(events: string[], error?: Error): ClusterSource {
  return {
    async start(sink) {
      events.push("source reads");
      await nextTurn();
      if (error !== undefined) {
        events.push("source fails");
        throw error;
      }
      sink.replace("Service", [svc({ name: "web" })]);
      sink.synced();
      events.push("source synced");
    },
    async stop() {
      events.push("source stopped");
    },
  };
}

function globalInvocation(
  source: ClusterSource,
  run: (cluster: ClusterView, ctx: GlobalSinkContext) => Promise<void>,
): Invocation {
  return {
    form: "global",
    source: sourcePlugin(source),
    sourceOpts: {},
    sink: {
      name: "to-fake",
      description: "fake",
      addOptions: () => {},
      parseOptions: () => ({}),
      run: (cluster, _opts, ctx) => run(cluster, ctx),
    },
    sinkOpts: {},
    serviceProxyName: "",
    serviceCIDRs: undefined,
  };
}

const untilSynced = (cluster: ClusterView) =>
  new Promise<void>((resolve) => {
    if (cluster.isSynced) return resolve();
    const unsubscribe = cluster.subscribe(() => {
      if (!cluster.isSynced) return;
      unsubscribe();
      resolve();
    });
  });

const context = () => ({ signal: new AbortController().signal, log: silentLogger });

test("the sink starts while the source reads, and sees the source's first state once synced", async () => {
  const events: string[] = [];
  let seen: string[] = [];
  const invocation = globalInvocation(slowSource(events), async (cluster) => {
    events.push("sink starts");
    await untilSynced(cluster);
    seen = [...cluster.services()].map((s) => s.metadata.name);
    events.push("sink done");
  });
  await runInvocation(invocation, context());
  assert.deepEqual(events, ["source reads", "sink starts", "source synced", "sink done", "source stopped"]);
  assert.deepEqual(seen, ["web"]);
});

test("a source that cannot start stops the sink, then its error is reported", async () => {
  const events: string[] = [];
  const invocation = globalInvocation(
    slowSource(events, new Error("cluster.json: JSON syntax error")),
    (_, ctx) => {
      events.push("sink starts");
      return new Promise<void>((resolve) =>
        ctx.signal.addEventListener("abort", () => {
          events.push("sink stopped");
          resolve();
        }),
      );
    },
  );
  await assert.rejects(runInvocation(invocation, context()), /JSON syntax error/);
  assert.deepEqual(events, ["source reads", "sink starts", "source fails", "sink stopped", "source stopped"]);
});

test("a sink that fails while the source reads is reported once the source has started, and the source is stopped", async () => {
  const events: string[] = [];
  const invocation = globalInvocation(slowSource(events), async () => {
    events.push("sink fails");
    throw new Error("to-fake cannot run here");
  });
  await assert.rejects(runInvocation(invocation, context()), /cannot run here/);
  assert.deepEqual(events, ["source reads", "sink fails", "source synced", "source stopped"]);
});

test("a signal during the source's read stops the sink as well", async () => {
  const events: string[] = [];
  const stop = new AbortController();
  const invocation = globalInvocation(slowSource(events), (_, ctx) => {
    events.push("sink starts");
    stop.abort();
    return new Promise<void>((resolve) => {
      if (ctx.signal.aborted) {
        events.push("sink stopped");
        resolve();
      }
    });
  });
  await runInvocation(invocation, { signal: stop.signal, log: silentLogger });
  // The source is told at once (a file source ends its read at its next turn); this one reads on.
  assert.deepEqual(events, [
    "source reads",
    "sink starts",
    "source stopped",
    "sink stopped",
    "source synced",
  ]);
});

test("a stop while the source still reads its first state stops the source then, not after its read", {
  timeout: 10_000,
}, async () => {
  const events: string[] = [];
  let endRead = () => {};
  // A read that only a stop ends (a file parsed for seconds, cut short at its next turn).
  const source: ClusterSource = {
    async start() {
      events.push("source reads");
      await new Promise<void>((resolve) => {
        endRead = resolve;
      });
      events.push("source read ends");
    },
    async stop() {
      events.push("source stopped");
      endRead();
    },
  };
  const invocation = globalInvocation(
    source,
    (_, ctx) =>
      new Promise<void>((resolve) =>
        ctx.signal.addEventListener("abort", () => {
          events.push("sink stopped");
          resolve();
        }),
      ),
  );
  const signal = new AbortController();
  const running = runInvocation(invocation, { signal: signal.signal, log: silentLogger });
  await nextTurn();
  signal.abort();
  await running;
  assert.ok(events.indexOf("source stopped") < events.indexOf("source read ends"), events.join(", "));
  assert.ok(events.includes("sink stopped"), events.join(", "));
});

/** A backend that takes the first state, then reports `syncs` syncs of it. */
function syncingSink(syncs: number) {
  return {
    name: "to-fake",
    description: "fake",
    binaries: [],
    addOptions: () => {},
    parseOptions: () => ({}),
    run: async (feed: LocalStateFeed) => {
      const state = await new Promise<LocalState>((resolve) => {
        const unsubscribe = feed.subscribe((s) => {
          unsubscribe();
          resolve(s);
        });
      });
      for (let i = 0; i < syncs; i++) {
        feed.programmed?.(state, ["IPv4"]);
        await nextTurn();
      }
    },
  };
}

/** A to-local run of backends that each report the given number of syncs. */
function localInvocation(source: ClusterSource, first: number, ...more: number[]): Invocation {
  return {
    form: "to-local",
    source: sourcePlugin(source),
    sourceOpts: {},
    sink: syncingSink(first),
    sinkOpts: {},
    serviceProxyName: "",
    serviceCIDRs: undefined,
    nodeName: "n1",
    minSyncPeriodMs: 0,
    moreSinks: more.map((syncs, i) => ({
      sink: syncingSink(syncs),
      sinkOpts: {},
      nodeName: "n1",
      minSyncPeriodMs: 0,
      serviceProxyName: `other-${i}`,
    })),
  };
}

test("the heap is collected once after every backend's first sync, and not before", async () => {
  const collected = (lines: readonly { msg?: unknown }[]) =>
    lines.filter((l) => l.msg === "collected the heap after the first sync").length;
  const rows: [syncs: number[], collections: number][] = [
    [[0], 0],
    [[1], 1],
    [[3], 1],
    [[2, 0], 0],
    [[1, 2], 1],
  ];
  for (const [[first = 0, ...more], collections] of rows) {
    const { log, lines } = capturingLogger("debug");
    const run = localInvocation(slowSource([]), first, ...more);
    await runInvocation(run, { signal: new AbortController().signal, log });
    await nextTurn();
    assert.equal(collected(lines), collections, `syncs ${[first, ...more]}`);
  }
});

test("a backend fed by the watch API: the heap is collected once after its first sync, which still reaches the feed", async () => {
  const reported: number[] = [];
  const feed: LocalStateFeed = {
    subscribe(listener) {
      queueMicrotask(
        () =>
          void listener({
            node: "n1",
            revision: 1,
            services: new Map(),
            serviceCIDRs: { IPv4: [], IPv6: [] },
          }),
      );
      return () => {};
    },
    programmed: (state) => reported.push(state.revision),
  };
  const invocation: Invocation = {
    form: "local",
    localSource: {
      name: "local",
      description: "fake",
      addOptions: () => {},
      parseOptions: () => ({}),
      createFeed: () => feed,
    },
    sourceOpts: {},
    sink: syncingSink(2),
    sinkOpts: {},
    serviceProxyName: undefined,
    nodeName: "n1",
    minSyncPeriodMs: 0,
  };
  const { log, lines } = capturingLogger("debug");
  await runInvocation(invocation, { signal: new AbortController().signal, log });
  await nextTurn();
  assert.equal(lines.filter((l) => l.msg === "collected the heap after the first sync").length, 1);
  assert.deepEqual(reported, [1, 1]);
});
