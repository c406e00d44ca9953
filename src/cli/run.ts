// Carries out a parsed command line: starts the source, the brain and the sink, and stops the
// source once the sink is done. Wiring only; every decision lives in the plug-ins and the brain.

import { ConfirmedHandover } from "../brain/handover.ts";
import { localStateFeed } from "../brain/local-state-feed.ts";
import { proxyNameView } from "../brain/proxy-name-view.ts";
import { RemoteHandovers } from "../brain/remote-handovers.ts";
import type { ProxyNames } from "../brain/selection.ts";
import { ClusterStore } from "../brain/store.ts";
import { collectAfterFirstLoad, collectAfterFirstSync } from "../host/full-collection.ts";
import type { ClusterSource, ClusterView } from "../model/global.ts";
import type { IPFamily } from "../model/kube.ts";
import type { LocalState, LocalStateFeed } from "../model/local.ts";
import type { RunContext } from "../plugin/contracts.ts";
import { pacedFeed } from "../plugin/paced-feed.ts";
import { UsageError } from "../plugin/usage-error.ts";
import { runExplain } from "./explain.ts";
import type { Invocation } from "./invocation.ts";
import { checkForKubeProxy } from "./kube-proxy-check.ts";
import { type SinkRun, sinkRuns } from "./multi-sink.ts";

/**
 * How long a Service relabelled away stays with its old proxy name's backend when the gaining
 * backend is a remote client that reports no syncs (one that predates sync reports): its default
 * --min-sync-period twice, and a margin for the sync.
 */
const UNCONFIRMED_HANDOVER_MS = 4000;

/**
 * Longest wait for the backend gaining a relabelled Service to confirm a sync that holds it: two
 * periodic resyncs (kube-proxy's default --sync-period) of a failing backend.
 */
const HANDOVER_FALLBACK_MS = 60_000;

export async function runInvocation(invocation: Invocation, ctx: RunContext): Promise<void> {
  switch (invocation.form) {
    case "to-local": {
      const { source, serviceCIDRs, nodeName } = invocation;
      const sinks = sinkRuns(invocation);
      // A kernel backend fed from the cluster: kube-proxy must not run beside it.
      if (source.name === "kube" && sinks.some((s) => s.sink.cleanup !== undefined))
        checkForKubeProxy(invocation.sourceOpts as object, ctx.log.child({ component: "kube-proxy-check" }));
      const store = clusterStore(
        ctx,
        sinks.map((s) => s.serviceProxyName),
        serviceCIDRs,
      );
      const sourceCtx = { ...ctx, nodeName, everyProxyName: sinks.length > 1 };
      const synced = afterFirstSyncs(ctx, sinks);
      await withSource(source.create(invocation.sourceOpts, sourceCtx), store, ctx, (sinkCtx) =>
        // One sink: the store already holds exactly its Services.
        sinks.length === 1
          ? runSink(store, sinks[0] as SinkRun, sinkCtx, synced)
          : runSinks(store, sinks, sinkCtx, synced),
      );
      return;
    }
    case "global": {
      const { source, sink, serviceProxyName, serviceCIDRs } = invocation;
      const everyProxyName = sink.everyProxyName?.(invocation.sinkOpts) === true;
      const store = clusterStore(ctx, everyProxyName ? "any" : [serviceProxyName], serviceCIDRs);
      const sourceCtx = { ...ctx, nodeName: undefined, everyProxyName };
      // Holding every Service, the sink still sees the source's own name's as its cluster.
      const cluster = everyProxyName ? proxyNameView(store, serviceProxyName) : store;
      // Each node's backends hand relabelled Services over as in one process, confirmed by the
      // sync reports of their clients.
      const remoteBackends = everyProxyName
        ? new RemoteHandovers(store, {
            fallbackMs: HANDOVER_FALLBACK_MS,
            unconfirmedMs: UNCONFIRMED_HANDOVER_MS,
            log: ctx.log.child({ component: "handover" }),
          })
        : undefined;
      await withSource(source.create(invocation.sourceOpts, sourceCtx), store, ctx, (sinkCtx) =>
        sink.run(cluster, invocation.sinkOpts, { ...sinkCtx, serviceProxyName, remoteBackends }),
      );
      return;
    }
    case "local": {
      const { localSource, sink, nodeName, minSyncPeriodMs, serviceProxyName } = invocation;
      const feed = localSource.createFeed(invocation.sourceOpts, nodeName, ctx, serviceProxyName);
      const synced = afterFirstSyncs(ctx, [sink]);
      const told = toldOfSyncs(feed, () => synced(sink));
      await sink.run(pacedFeed(told, minSyncPeriodMs, ctx.log), invocation.sinkOpts, ctx);
      return;
    }
    case "explain":
      await runExplain(invocation.request, ctx);
      return;
    case "controller":
      await invocation.controller.run(invocation.opts, ctx);
      return;
    case "cleanup": {
      const { sink } = invocation;
      if (sink.cleanup === undefined) throw new UsageError(`${sink.name} has no cleanup`);
      await sink.cleanup(invocation.sinkOpts, ctx);
      return;
    }
  }
}

/** The store of a run fed from the cluster; the heap is collected once its first load is in. */
function clusterStore(
  ctx: RunContext,
  serviceProxyNames: ProxyNames,
  serviceCIDRs: readonly string[] | undefined,
): ClusterStore {
  const log = ctx.log.child({ component: "store" });
  return new ClusterStore({
    serviceProxyNames,
    serviceCIDRs,
    log,
    afterFirstLoad: () => collectAfterFirstLoad(log),
  });
}

/**
 * Told of every sync of the run's backends; the heap is collected once each has synced
 * (collectAfterFirstSync), on the next turn, after the sync loop has recorded its sync.
 */
function afterFirstSyncs<Backend>(ctx: RunContext, backends: readonly Backend[]): (backend: Backend) => void {
  const waiting = new Set(backends);
  return (backend) => {
    if (!waiting.delete(backend) || waiting.size > 0) return;
    setImmediate(() => collectAfterFirstSync(ctx.log.child({ component: "heap" }))).unref();
  };
}

/** `feed`, whose backend's syncs also go to `synced`, after what the feed itself does with them. */
function toldOfSyncs(feed: LocalStateFeed, synced: () => void): LocalStateFeed {
  return {
    ...feed,
    programmed: (state, families) => {
      feed.programmed?.(state, families);
      synced();
    },
  };
}

function runSink(
  view: ClusterView,
  run: SinkRun,
  ctx: RunContext,
  synced: (run: SinkRun) => void,
  report?: LocalStateFeed["programmed"],
): Promise<void> {
  // The run's backends serve this node alone (the watch API, which serves many, is another form).
  const local = localStateFeed(view, run.nodeName, { alone: true });
  const told = toldOfSyncs({ ...local, programmed: report }, () => synced(run));
  const feed = pacedFeed(told, run.minSyncPeriodMs, ctx.log);
  return run.sink.run(feed, run.sinkOpts, ctx);
}

/**
 * Several sinks, each on its own share of the store. A sink that fails stops the others (each
 * cleans up on its own, as on a signal); the first failure is then reported.
 */
async function runSinks(
  store: ClusterView,
  runs: readonly SinkRun[],
  ctx: RunContext,
  synced: (run: SinkRun) => void,
): Promise<void> {
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  // A relabelled Service stays with the losing backend until the gaining one confirms a sync
  // that holds it: served by both until the loser's next sync, never by neither.
  const handover = new ConfirmedHandover({
    backends: new Map(runs.map((r) => [r.serviceProxyName, true])),
    fallbackMs: HANDOVER_FALLBACK_MS,
    log: ctx.log.child({ component: "handover" }),
  });
  ctx.signal.addEventListener("abort", onAbort, { once: true });
  try {
    const outcomes = await Promise.allSettled(
      runs.map((run) => {
        const log = ctx.log.child({ backend: run.sink.name, serviceProxyName: run.serviceProxyName });
        const view = proxyNameView(store, run.serviceProxyName, handover);
        const programmed = (state: LocalState, families: readonly IPFamily[]) =>
          handover.programmed(run.serviceProxyName, state.services, families);
        return runSink(view, run, { signal: stop.signal, log }, synced, programmed).catch((err: unknown) => {
          log.error({ err }, "backend failed; stopping the others");
          stop.abort();
          throw err;
        });
      }),
    );
    const failed = outcomes.find((o) => o.status === "rejected");
    if (failed !== undefined) throw failed.reason;
  } finally {
    ctx.signal.removeEventListener("abort", onAbort);
  }
}

/**
 * Runs the sinks while the source reads its first state, not after: a file source parses for
 * seconds at 100k Services, time in which a backend loads its programs or starts its runner. The
 * sinks wait for the store's first sync, as they do for a source that lists from the API. A source
 * that fails to start stops the sinks, which clean up as on a signal, and its error is reported; a
 * signal stops the source at once, which ends a read still under way.
 */
async function withSource(
  source: ClusterSource,
  store: ClusterStore,
  ctx: RunContext,
  body: (ctx: RunContext) => Promise<void>,
): Promise<void> {
  const stop = new AbortController();
  const started = source.start(store).catch((err: unknown) => {
    stop.abort();
    throw err;
  });
  const signal = AbortSignal.any([ctx.signal, stop.signal]);
  let stopping: Promise<void> | undefined;
  const stopSource = () => {
    stopping ??= source.stop();
    return stopping;
  };
  // A stop asked for while the source still reads its first state ends that read now.
  const stopEarly = () => void stopSource().catch(() => undefined);
  ctx.signal.addEventListener("abort", stopEarly, { once: true });
  const running = (async () => body({ ...ctx, signal }))();
  const outcomes = await Promise.allSettled([started, running]);
  ctx.signal.removeEventListener("abort", stopEarly);
  const failure = outcomes.find((o) => o.status === "rejected");
  if (failure === undefined) return stopSource();
  // A source that failed half-way may hold watches or connections.
  await stopSource().catch(() => undefined);
  throw failure.reason;
}
