// One computation of a Service for every node that looks the same to it. A node that hosts none
// of the service's endpoints and that no topology hint names sees the service only through its
// zone (the brain compares node names, never orders or parses them), so every such node of one
// zone gets the same LocalService object. A brain serving 1,000 nodes then computes a change
// once per zone plus once per node that hosts an endpoint, and the watch API encodes it once.

import type { EndpointSlice, Service } from "../model/kube.ts";
import { LABEL_ZONE } from "../model/kube.ts";
import type { LocalService } from "../model/local.ts";
import { sameLocalService } from "./local-equal.ts";
import { computeLocalService, type FamilyView, type NodeView, serviceFamilyViews } from "./local-service.ts";

interface Entry {
  /** The slices the results were computed from (the store keeps one array while they are unchanged). */
  readonly slices: readonly EndpointSlice[];
  /**
   * Nodes that host an endpoint or are named by a hint: computed on their own. Built when a
   * second node asks; the first one looks through the slices (a brain serving one node never
   * builds it).
   */
  named: ReadonlySet<string> | undefined;
  /** The first node that asked, and whether the slices name it. */
  readonly firstNode: string;
  readonly firstNamed: boolean;
  /**
   * The service's family views (merged endpoints), shared by the computations for every node but
   * the first: made when a second node asks (a brain serving one node never keeps them).
   */
  views: readonly FamilyView[] | undefined;
  /** The result for every other node: of the first zone asked inline, of other zones in a map. */
  zone: string | undefined;
  result: LocalService | undefined;
  otherZones: Map<string, LocalService | undefined> | undefined;
}

/** Names of the nodes that host an endpoint of the slices or that a node hint names. */
export function nodesNamedBy(slices: readonly EndpointSlice[]): Set<string> {
  const out = new Set<string>();
  for (const slice of slices) {
    for (const ep of slice.endpoints) {
      if (ep.nodeName !== "") out.add(ep.nodeName);
      for (const name of ep.nodeHints) out.add(name);
    }
  }
  return out;
}

function names(slices: readonly EndpointSlice[], node: string): boolean {
  for (const slice of slices) {
    for (const ep of slice.endpoints) if (ep.nodeName === node || ep.nodeHints.includes(node)) return true;
  }
  return false;
}

export class LocalServiceCache {
  /** Keyed by the Service object: a changed Service is a new object, and the old entry is collected. */
  readonly #entries = new WeakMap<Service, Entry>();

  compute(service: Service, slices: readonly EndpointSlice[], node: NodeView): LocalService | undefined {
    let entry = this.#entries.get(service);
    let named: boolean;
    if (entry === undefined || entry.slices !== slices) {
      named = node.name !== "" && names(slices, node.name);
      entry = {
        slices,
        named: undefined,
        firstNode: node.name,
        firstNamed: named,
        views: undefined,
        zone: undefined,
        result: undefined,
        otherZones: undefined,
      };
      this.#entries.set(service, entry);
    } else if (entry.firstNode === node.name) named = entry.firstNamed;
    else {
      entry.named ??= nodesNamedBy(slices);
      named = entry.named.has(node.name);
    }
    const zone = node.labels[LABEL_ZONE] ?? "";
    if (!named) {
      if (entry.zone === zone) return entry.result;
      if (entry.otherZones?.has(zone)) return entry.otherZones.get(zone);
    }
    let computed: LocalService | undefined;
    if (entry.firstNode === node.name) computed = computeLocalService(service, slices, node);
    else {
      entry.views ??= serviceFamilyViews(service, slices);
      computed = entry.views && computeLocalService(service, slices, node, entry.views);
    }
    if (named) return computed;
    if (entry.zone === undefined) {
      entry.zone = zone;
      entry.result = computed;
      return computed;
    }
    // Zones that see the service alike (no topology hints) share one object too: consumers
    // (the watch API's encodings, the nft mirror) then do their work once, not once per zone.
    for (const other of [entry.result, ...(entry.otherZones?.values() ?? [])]) {
      if (computed !== undefined && other !== undefined && sameLocalService(other, computed)) {
        computed = other;
        break;
      }
    }
    entry.otherZones ??= new Map();
    entry.otherZones.set(zone, computed);
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
