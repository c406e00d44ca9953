// One backend's share of a store that serves several service proxy names: the Services labelled
// with its name (or unlabelled, for ""), with all their EndpointSlices. Slices follow their
// Service, not their own label, so a relabelled Service moves between backends whole, in the
// batch that relabels it, even while its slices still carry the old label. The Service IP ranges
// are left out (see serviceCIDRs below).
//
// A Service relabelled away is handed over (handover.ts): the losing view keeps it until the
// handover releases it, so that the gaining backend programs it before the losing one removes
// it. Both holding it for a moment is harmless (the first DNAT wins); neither holding it would
// reject new connections.

import type { ClusterChange, ClusterView } from "../model/global.ts";
import { type EndpointSlice, objectKey, type Service, sliceServiceKey } from "../model/kube.ts";
import type { Handover } from "./handover.ts";
import { selectedByProxyName } from "./selection.ts";

const NO_SLICES: readonly EndpointSlice[] = Object.freeze([]);
const NO_RANGES: readonly string[] = Object.freeze([]);

/** `following`: told when the view starts (true) and stops (false) following the store. */
export function proxyNameView(
  store: ClusterView,
  serviceProxyName: string,
  handover?: Handover,
  following?: (on: boolean) => void,
): ClusterView {
  const selected = (service: Service | undefined): service is Service =>
    service !== undefined && selectedByProxyName(service.metadata.labels, serviceProxyName);
  /** The Services this view showed after the last batch. */
  const shown = new Map<string, Service>();
  /** Relabelled away, still shown until the handover releases them. */
  const leaving = new Map<string, Service>();
  const listeners = new Set<(change: ClusterChange) => void>();
  let unsubscribe: (() => void) | undefined;

  const visible = (key: string): Service | undefined => {
    const service = store.service(key);
    return selected(service) ? service : leaving.get(key);
  };

  const endHandover = (key: string) => {
    if (!leaving.has(key)) return;
    leaving.delete(key);
    shown.delete(key);
    const change: ClusterChange = { services: new Set([key]), nodes: new Set(), serviceCIDRs: false };
    for (const listener of listeners) listener(change);
  };

  const onChange = (change: ClusterChange) => {
    for (const key of change.services) {
      const service = store.service(key);
      const was = shown.get(key) ?? leaving.get(key);
      if (selected(service)) {
        if (leaving.delete(key)) handover?.cancel(key, serviceProxyName);
        shown.set(key, service);
      } else if (service !== undefined && was !== undefined && handover !== undefined) {
        // Still in the cluster, now another proxy's: keep the version this view last served.
        if (!leaving.has(key)) {
          leaving.set(key, was);
          // May release at once (nothing to hand over): after this batch's listeners.
          handover.begin(key, serviceProxyName, service, () => queueMicrotask(() => endHandover(key)));
        }
      } else {
        if (leaving.delete(key)) handover?.cancel(key, serviceProxyName);
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
        following?.(true);
        unsubscribe = store.subscribe(onChange);
        // Subscribed after the sync batch: what the view shows now is what it will hand over.
        for (const service of store.services())
          if (selected(service)) shown.set(objectKey(service.metadata), service);
      }
      return () => {
        listeners.delete(listener);
        if (listeners.size > 0) return;
        unsubscribe?.();
        unsubscribe = undefined;
        following?.(false);
      };
    },
    service: (key) => visible(key),
    slicesOf: (key) => (visible(key) !== undefined ? store.slicesOf(key) : NO_SLICES),
    node: (name) => store.node(name),
    *services() {
      for (const service of store.services()) if (selected(service)) yield service;
      yield* leaving.values();
    },
    *serviceKeys() {
      for (const service of store.services()) if (selected(service)) yield objectKey(service.metadata);
      yield* leaving.keys();
    },
    *slices() {
      for (const slice of store.slices()) if (visible(sliceServiceKey(slice)) !== undefined) yield slice;
    },
    nodes: () => store.nodes(),
    serviceCIDRObjects: () => store.serviceCIDRObjects(),
    // No backend holds every Service IP: one that dropped the unallocated addresses of the
    // ranges would drop the Services of the others.
    serviceCIDRs: () => NO_RANGES,
  };
}
