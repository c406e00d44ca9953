// Carries out a parsed command line: starts the source, the brain and the sink, and stops the
// source once the sink is done. Wiring only; every decision lives in the plug-ins and the brain.

import { localStateFeed } from "../brain/local-state.ts";
import { ClusterStore } from "../brain/store.ts";
import type { ClusterSource } from "../model/global.ts";
import type { RunContext } from "../plugin/contracts.ts";
import { UsageError } from "../plugin/usage-error.ts";
import type { Invocation } from "./invocation.ts";

export async function runInvocation(invocation: Invocation, ctx: RunContext): Promise<void> {
  switch (invocation.form) {
    case "to-local": {
      const { source, sink, opts, serviceProxyName, serviceCIDRs, nodeName, minSyncPeriodMs } = invocation;
      const store = new ClusterStore({
        serviceProxyName,
        serviceCIDRs,
        log: ctx.log.child({ component: "store" }),
      });
      await withSource(
        createSource(() => source.create(opts, ctx)),
        store,
        () => sink.run(localStateFeed(store, nodeName, { minSyncPeriodMs }), opts, ctx),
      );
      return;
    }
    case "global": {
      const { source, sink, opts, serviceProxyName, serviceCIDRs } = invocation;
      const store = new ClusterStore({
        serviceProxyName,
        serviceCIDRs,
        log: ctx.log.child({ component: "store" }),
      });
      await withSource(
        createSource(() => source.create(opts, ctx)),
        store,
        () => sink.run(store, opts, ctx),
      );
      return;
    }
    case "local": {
      const { localSource, sink, opts, nodeName } = invocation;
      // No --min-sync-period here: the remote brain paces its stream.
      const feed = createSource(() => localSource.createFeed(opts, nodeName, ctx));
      await sink.run(feed, opts, ctx);
      return;
    }
    case "cleanup": {
      const { sink, opts } = invocation;
      if (sink.cleanup === undefined) throw new UsageError(`${sink.name} has no cleanup`);
      await sink.cleanup(opts, ctx);
      return;
    }
  }
}

/** Plug-ins throw on bad option values (their contract); those are usage errors. */
function createSource<T>(create: () => T): T {
  try {
    return create();
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

async function withSource(
  source: ClusterSource,
  store: ClusterStore,
  body: () => Promise<void>,
): Promise<void> {
  try {
    await source.start(store);
  } catch (err) {
    // A source that failed half-way may hold watches or connections.
    await source.stop().catch(() => undefined);
    throw err;
  }
  try {
    await body();
  } finally {
    await source.stop();
  }
}
