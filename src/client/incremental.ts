// An incremental sink: callbacks per service and per endpoint that changed, then sync().
// A Reset from the server (a new brain, or a resume it could not honour) never reaches the
// handlers as "forget everything": the sink compares with what it already gave them and
// reports only the real difference, deletes included.

import {
  allServiceCIDRs,
  type LocalEndpoint,
  type LocalService,
  type LocalState,
  type LocalStateFeed,
} from "../model/local.ts";
import { changedServiceKeys } from "../model/local-changes.ts";

export interface IncrementalHandlers {
  setService(service: LocalService): void | Promise<void>;
  deleteService(namespace: string, name: string): void | Promise<void>;
  /** key: the endpoint IP; endpoints are per service, across its ports. */
  setEndpoint(namespace: string, service: string, key: string, endpoint: LocalEndpoint): void | Promise<void>;
  deleteEndpoint(namespace: string, service: string, key: string): void | Promise<void>;
  /** The cluster's Service IP ranges changed (the whole list; empty: none known). */
  setServiceCIDRs?(cidrs: readonly string[]): void | Promise<void>;
  /** The handlers have seen a complete, consistent state. */
  sync(state: LocalState): void | Promise<void>;
}

function endpointsOf(svc: LocalService): Map<string, LocalEndpoint> {
  const out = new Map<string, LocalEndpoint>();
  for (const port of svc.ports) {
    for (const ep of [...port.internalEndpoints, ...port.externalEndpoints])
      if (!out.has(ep.ip)) out.set(ep.ip, ep);
  }
  return out;
}

const sameEndpoint = (a: LocalEndpoint, b: LocalEndpoint) =>
  a.port === b.port &&
  a.local === b.local &&
  a.ready === b.ready &&
  a.serving === b.serving &&
  a.terminating === b.terminating;

export function incrementalSink(feed: LocalStateFeed, handlers: IncrementalHandlers): () => void {
  let previousState: LocalState | undefined;
  let previousCIDRs: readonly string[] = [];
  return feed.subscribe(async (state) => {
    const cidrs = allServiceCIDRs(state.serviceCIDRs);
    if (cidrs.length !== previousCIDRs.length || cidrs.some((c, i) => c !== previousCIDRs[i])) {
      await handlers.setServiceCIDRs?.(cidrs);
      previousCIDRs = cidrs;
    }
    const previous: ReadonlyMap<string, LocalService> = previousState?.services ?? new Map();
    const keys = [...changedServiceKeys(previousState, state)].sort();
    // Services first, endpoints next, service deletes last: no endpoint without its service.
    for (const key of keys) {
      const cur = state.services.get(key);
      if (cur !== undefined && cur !== previous.get(key)) await handlers.setService(cur);
    }
    for (const key of keys) {
      const old = previous.get(key);
      const cur = state.services.get(key);
      if (old === cur) continue;
      const oldEps = old === undefined ? new Map<string, LocalEndpoint>() : endpointsOf(old);
      const curEps = cur === undefined ? new Map<string, LocalEndpoint>() : endpointsOf(cur);
      const svc = (cur ?? old)!;
      for (const ip of oldEps.keys())
        if (!curEps.has(ip)) await handlers.deleteEndpoint(svc.namespace, svc.name, ip);
      for (const [ip, ep] of curEps) {
        const was = oldEps.get(ip);
        if (was === undefined || !sameEndpoint(was, ep))
          await handlers.setEndpoint(svc.namespace, svc.name, ip, ep);
      }
    }
    for (const key of keys) {
      const old = previous.get(key);
      if (old !== undefined && !state.services.has(key))
        await handlers.deleteService(old.namespace, old.name);
    }
    previousState = state;
    await handlers.sync(state);
  });
}
