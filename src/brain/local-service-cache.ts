// One computation of a Service for every node that looks the same to it. A node that hosts none
// of the service's endpoints and that no topology hint names sees the service only through its
// zone (the brain compares node names, never orders or parses them), so every such node of one
// zone gets the same LocalService object. A brain serving 1,000 nodes then computes a change
// once per zone plus once per node that hosts an endpoint, and the watch API encodes it once.

import type { EndpointSlice, Service } from "../model/kube.ts";
import { LABEL_ZONE } from "../model/kube.ts";
import type { LocalService } from "../model/local.ts";
import { computeLocalService, type NodeView } from "./local-service.ts";

interface Entry {
  /** The slices the results were computed from (the store keeps one array while they are unchanged). */
  readonly slices: readonly EndpointSlice[];
  /** Nodes that host an endpoint or are named by a hint: computed on their own. */
  readonly named: ReadonlySet<string>;
  /** The result for every other node, by zone. */
  readonly byZone: Map<string, LocalService | undefined>;
}

function namedNodes(slices: readonly EndpointSlice[]): Set<string> {
  const out = new Set<string>();
  for (const slice of slices) {
    for (const ep of slice.endpoints) {
      if (ep.nodeName !== "") out.add(ep.nodeName);
      for (const name of ep.nodeHints) out.add(name);
    }
  }
  return out;
}

export class LocalServiceCache {
  /** Keyed by the Service object: a changed Service is a new object, and the old entry is collected. */
  readonly #entries = new WeakMap<Service, Entry>();

  compute(service: Service, slices: readonly EndpointSlice[], node: NodeView): LocalService | undefined {
    let entry = this.#entries.get(service);
    if (entry === undefined || entry.slices !== slices) {
      entry = { slices, named: namedNodes(slices), byZone: new Map() };
      this.#entries.set(service, entry);
    }
    if (entry.named.has(node.name)) return computeLocalService(service, slices, node);
    const zone = node.labels[LABEL_ZONE] ?? "";
    if (entry.byZone.has(zone)) return entry.byZone.get(zone);
    const computed = computeLocalService(service, slices, node);
    entry.byZone.set(zone, computed);
    return computed;
  }
}

const caches = new WeakMap<object, LocalServiceCache>();

/** The cache shared by every tracker of one store. */
export function localServiceCacheOf(store: object): LocalServiceCache {
  let cache = caches.get(store);
  if (cache === undefined) {
    cache = new LocalServiceCache();
    caches.set(store, cache);
  }
  return cache;
}
