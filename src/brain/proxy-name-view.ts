// One backend's share of a store that serves several service proxy names: the Services labelled
// with its name (or unlabelled, for ""), with all their EndpointSlices. Slices follow their
// Service, not their own label, so a relabelled Service moves between backends whole, in the
// batch that relabels it, even while its slices still carry the old label. The Service IP ranges
// are left out (see serviceCIDRs below).
//
// A Service relabelled away is handed over: the losing view keeps it for `handoverMs` more, so
// that the gaining backend programs it before the losing one removes it. Both holding it for a
// moment is harmless (the first DNAT wins); neither holding it would reject new connections.

import type { ClusterChange, ClusterView } from "../model/global.ts";
import type { EndpointSlice, Service } from "../model/kube.ts";
import { selectedByProxyName } from "./selection.ts";

const NO_SLICES: readonly EndpointSlice[] = Object.freeze([]);
const NO_RANGES: readonly string[] = Object.freeze([]);

interface HandoverTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const REAL_TIMERS: HandoverTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export function proxyNameView(
  store: ClusterView,
  serviceProxyName: string,
  handoverMs = 0,
  timers: HandoverTimers = REAL_TIMERS,
): ClusterView {
  const selected = (service: Service | undefined): service is Service =>
    service !== undefined && selectedByProxyName(service.metadata.labels, serviceProxyName);
  const serviceKeyOf = (slice: EndpointSlice) => `${slice.metadata.namespace}/${slice.serviceName}`;
  /** The Services this view showed after the last batch. */
  const shown = new Map<string, Service>();
  /** Relabelled away, still shown until the handover ends. */
  const leaving = new Map<string, { readonly service: Service; readonly timer: unknown }>();
  const listeners = new Set<(change: ClusterChange) => void>();
  let unsubscribe: (() => void) | undefined;

  const visible = (key: string): Service | undefined => {
    const service = store.service(key);
    return selected(service) ? service : leaving.get(key)?.service;
  };

  const endHandover = (key: string) => {
    leaving.delete(key);
    shown.delete(key);
    const change: ClusterChange = { services: new Set([key]), nodes: new Set(), serviceCIDRs: false };
    for (const listener of listeners) listener(change);
  };

  const onChange = (change: ClusterChange) => {
    for (const key of change.services) {
      const service = store.service(key);
      const was = shown.get(key) ?? leaving.get(key)?.service;
      if (selected(service)) {
        const left = leaving.get(key);
        if (left !== undefined) timers.clearTimeout(left.timer);
        leaving.delete(key);
        shown.set(key, service);
      } else if (service !== undefined && was !== undefined && handoverMs > 0) {
        // Still in the cluster, now another proxy's: keep the version this view last served.
        if (!leaving.has(key))
          leaving.set(key, { service: was, timer: timers.setTimeout(() => endHandover(key), handoverMs) });
      } else {
        const left = leaving.get(key);
        if (left !== undefined) timers.clearTimeout(left.timer);
        leaving.delete(key);
        shown.delete(key);
      }
    }
    for (const listener of listeners) listener(change);
  };

  return {
    get isSynced() {
      return store.isSynced;
    },
    subscribe(listener: (change: ClusterChange) => void) {
      listeners.add(listener);
      if (unsubscribe === undefined) {
        unsubscribe = store.subscribe(onChange);
        // Subscribed after the sync batch: what the view shows now is what it will hand over.
        for (const service of store.services())
          if (selected(service)) shown.set(`${service.metadata.namespace}/${service.metadata.name}`, service);
      }
      return () => {
        listeners.delete(listener);
        if (listeners.size > 0) return;
        unsubscribe?.();
        unsubscribe = undefined;
      };
    },
    service: (key) => visible(key),
    slicesOf: (key) => (visible(key) !== undefined ? store.slicesOf(key) : NO_SLICES),
    node: (name) => store.node(name),
    *services() {
      for (const service of store.services()) if (selected(service)) yield service;
      for (const { service } of leaving.values()) yield service;
    },
    *serviceKeys() {
      for (const service of store.services())
        if (selected(service)) yield `${service.metadata.namespace}/${service.metadata.name}`;
      yield* leaving.keys();
    },
    *slices() {
      for (const slice of store.slices()) if (visible(serviceKeyOf(slice)) !== undefined) yield slice;
    },
    nodes: () => store.nodes(),
    serviceCIDRObjects: () => store.serviceCIDRObjects(),
    // No backend holds every Service IP: one that dropped the unallocated addresses of the
    // ranges would drop the Services of the others.
    serviceCIDRs: () => NO_RANGES,
  };
}
