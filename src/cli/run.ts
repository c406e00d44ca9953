// Carries out a parsed command line: starts the source, the brain and the sink, and stops the
// source once the sink is done. Wiring only; every decision lives in the plug-ins and the brain.

import { localStateFeed } from "../brain/local-state-feed.ts";
import { ClusterStore } from "../brain/store.ts";
import type { ClusterSource } from "../model/global.ts";
import type { RunContext } from "../plugin/contracts.ts";
import { pacedFeed } from "../plugin/paced-feed.ts";
import { UsageError } from "../plugin/usage-error.ts";
import type { Invocation } from "./invocation.ts";
import { checkForKubeProxy } from "./kube-proxy-check.ts";

export async function runInvocation(invocation: Invocation, ctx: RunContext): Promise<void> {
  switch (invocation.form) {
    case "to-local": {
      const { source, sink, serviceProxyName, serviceCIDRs, nodeName, minSyncPeriodMs } = invocation;
      // A kernel backend fed from the cluster: kube-proxy must not run beside it.
      if (source.name === "kube" && sink.cleanup !== undefined)
        checkForKubeProxy(invocation.sourceOpts as object, ctx.log.child({ component: "kube-proxy-check" }));
      const store = new ClusterStore({
        serviceProxyName,
        serviceCIDRs,
        log: ctx.log.child({ component: "store" }),
      });
      await withSource(source.create(invocation.sourceOpts, { ...ctx, nodeName }), store, () =>
        sink.run(
          pacedFeed(localStateFeed(store, nodeName), minSyncPeriodMs, ctx.log),
          invocation.sinkOpts,
          ctx,
        ),
      );
      return;
    }
    case "global": {
      const { source, sink, serviceProxyName, serviceCIDRs } = invocation;
      const store = new ClusterStore({
        serviceProxyName,
        serviceCIDRs,
        log: ctx.log.child({ component: "store" }),
      });
      await withSource(source.create(invocation.sourceOpts, { ...ctx, nodeName: undefined }), store, () =>
        sink.run(store, invocation.sinkOpts, ctx),
      );
      return;
    }
    case "local": {
      const { localSource, sink, nodeName, minSyncPeriodMs } = invocation;
      const feed = localSource.createFeed(invocation.sourceOpts, nodeName, ctx);
      await sink.run(pacedFeed(feed, minSyncPeriodMs, ctx.log), invocation.sinkOpts, ctx);
      return;
    }
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
