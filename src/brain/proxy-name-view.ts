// One backend's share of a store that serves several service proxy names: the Services labelled
// with its name (or unlabelled, for ""), with all their EndpointSlices. Slices follow their
// Service, not their own label, so a relabelled Service moves between backends whole, in the
// batch that relabels it, even while its slices still carry the old label. The Service IP ranges
// are left out (see serviceCIDRs below).

import type { ClusterChange, ClusterView } from "../model/global.ts";
import type { EndpointSlice, Service } from "../model/kube.ts";
import { selectedByProxyName } from "./selection.ts";

const NO_SLICES: readonly EndpointSlice[] = Object.freeze([]);
const NO_RANGES: readonly string[] = Object.freeze([]);

export function proxyNameView(store: ClusterView, serviceProxyName: string): ClusterView {
  const selected = (service: Service | undefined): service is Service =>
    service !== undefined && selectedByProxyName(service.metadata.labels, serviceProxyName);
  const serviceKeyOf = (slice: EndpointSlice) => `${slice.metadata.namespace}/${slice.serviceName}`;
  return {
    get isSynced() {
      return store.isSynced;
    },
    subscribe: (listener: (change: ClusterChange) => void) => store.subscribe(listener),
    service: (key) => {
      const service = store.service(key);
      return selected(service) ? service : undefined;
    },
    slicesOf: (key) => (selected(store.service(key)) ? store.slicesOf(key) : NO_SLICES),
    node: (name) => store.node(name),
    *services() {
      for (const service of store.services()) if (selected(service)) yield service;
    },
    *slices() {
      for (const slice of store.slices()) if (selected(store.service(serviceKeyOf(slice)))) yield slice;
    },
    nodes: () => store.nodes(),
    serviceCIDRObjects: () => store.serviceCIDRObjects(),
    // No backend holds every Service IP: one that dropped the unallocated addresses of the
    // ranges would drop the Services of the others.
    serviceCIDRs: () => NO_RANGES,
  };
}
