// A LocalStateFeed backed by a remote brain: what `kpng local --api …` hands to a local sink,
// so every sink runs the same against an in-process or a remote brain.

import type { LocalState, LocalStateFeed } from "../model/local.ts";
import type { Logger } from "../observability/log.ts";
import type { TlsPaths } from "./connection.ts";
import { LocalStateDecoder } from "./decoder.ts";
import { SyncReporter } from "./sync-reports.ts";
import { watchLocal } from "./watch.ts";

interface RemoteFeedOptions {
  readonly api: string;
  readonly nodeName: string;
  /** The Services of this service proxy name ("" the unlabelled ones); undefined: the brain's own. */
  readonly serviceProxyName?: string | undefined;
  readonly tls?: TlsPaths;
  readonly signal: AbortSignal;
  readonly log?: Logger;
}

export function remoteLocalStateFeed(options: RemoteFeedOptions): LocalStateFeed {
  const reporter = new SyncReporter();
  /**
   * The change set each delivered state's Services came from, for the sync reports. Keyed by the
   * Services map, which wrappers of the state (the service range guard) keep as it is.
   */
  const origins = new WeakMap<LocalState["services"], { instanceId: string; revision: number }>();
  return {
    // The brain hands a relabelled Service to this backend once a report shows its rules hold it.
    programmed(state, families) {
      const origin = origins.get(state.services);
      if (origin !== undefined && families.length > 0) reporter.report({ ...origin, families });
    },
    subscribe(listener: (state: LocalState) => void | Promise<void>): () => void {
      const stop = new AbortController();
      const signal = AbortSignal.any([stop.signal, options.signal]);
      const decoder = new LocalStateDecoder(options.nodeName);
      let delivered = false;
      void watchLocal(
        options.nodeName,
        {
          api: options.api,
          tls: options.tls,
          signal,
          log: options.log,
          syncReports: reporter,
          onChangeSet: async (changeSet) => {
            const { state, changed } = decoder.apply(changeSet);
            if (changeSet.instanceId !== "")
              origins.set(state.services, { instanceId: changeSet.instanceId, revision: changeSet.revision });
            // The first state is always delivered (even empty); later ones only when they differ.
            if (changed || !delivered) {
              delivered = true;
              await listener(state);
            }
          },
        },
        options.serviceProxyName,
      );
      return () => stop.abort();
    },
  };
}
