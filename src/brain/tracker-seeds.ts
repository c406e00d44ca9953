// A new node's first local state, seeded from another node of its zone. Nodes of one zone see
// every service alike except the services whose endpoints run on (or whose hints name) one of
// them (see local-service-cache.ts), so a new node's state is a sibling's state (a persistent
// map: shared, not copied) with only the services naming either node computed again. A brain
// serving 1,000 nodes then computes ~100 services for a new node instead of every service.
//
// Why this is exact: the sibling's tracker has applied every change the store delivered, and a
// change still pending will be delivered to the new tracker as well, which computes it then.

import type { ClusterChange, ClusterView } from "../model/global.ts";
import { objectKey } from "../model/kube.ts";
import type { LocalService } from "../model/local.ts";
import type { PersistentMap } from "../model/persistent-map.ts";
import { nodesNamedBy } from "./local-service-cache.ts";

/** What a tracker shows to be used as a seed. */
export interface SeedSource {
  /** The zone its state was computed for, and whether it still follows the store. */
  readonly zone: string | undefined;
  readonly nodeName: string;
  readonly services: PersistentMap<LocalService>;
}

interface Seed {
  readonly services: PersistentMap<LocalService>;
  /** Services to compute again for the new node: those naming either node. */
  readonly recompute: ReadonlySet<string>;
}

const NONE: ReadonlySet<string> = new Set();

export class TrackerSeeds {
  readonly #store: ClusterView;
  /** Node name → keys of the services that name it; kept current from the store's changes. */
  readonly #servicesNaming = new Map<string, Set<string>>();
  /** Service key → the node names it named when last indexed. */
  readonly #namedBy = new Map<string, Set<string>>();
  readonly #byZone = new Map<string, SeedSource>();
  #indexed = false;

  constructor(store: ClusterView) {
    this.#store = store;
  }

  /** The latest tracker to have computed a whole state for its zone; it must call `forget` when it stops. */
  offer(source: SeedSource): void {
    if (source.zone !== undefined) this.#byZone.set(source.zone, source);
  }

  forget(source: SeedSource): void {
    for (const [zone, s] of this.#byZone) if (s === source) this.#byZone.delete(zone);
  }

  /** A seed for a node of this zone, or undefined when no live node of the zone has a state. */
  seedFor(nodeName: string, zone: string): Seed | undefined {
    if (!this.#store.isSynced) return undefined;
    const source = this.#byZone.get(zone);
    if (source === undefined || source.zone !== zone || source.nodeName === nodeName) return undefined;
    this.#index();
    const recompute = new Set(this.#servicesNaming.get(nodeName) ?? NONE);
    for (const key of this.#servicesNaming.get(source.nodeName) ?? NONE) recompute.add(key);
    return { services: source.services, recompute };
  }

  /** Builds the index on first use, then follows the store's changes (O(changed)). */
  #index(): void {
    if (this.#indexed) return;
    this.#indexed = true;
    for (const service of this.#store.services()) this.#reindex(objectKey(service.metadata));
    this.#store.subscribe((change: ClusterChange) => {
      for (const key of change.services) this.#reindex(key);
    });
  }

  #reindex(key: string): void {
    for (const name of this.#namedBy.get(key) ?? NONE) {
      const keys = this.#servicesNaming.get(name);
      keys?.delete(key);
      if (keys?.size === 0) this.#servicesNaming.delete(name);
    }
    const names =
      this.#store.service(key) === undefined ? new Set<string>() : nodesNamedBy(this.#store.slicesOf(key));
    if (names.size === 0) this.#namedBy.delete(key);
    else this.#namedBy.set(key, names);
    for (const name of names) {
      let keys = this.#servicesNaming.get(name);
      if (keys === undefined) {
        keys = new Set();
        this.#servicesNaming.set(name, keys);
      }
      keys.add(key);
    }
  }
}

const registries = new WeakMap<object, TrackerSeeds>();

/** The seeds shared by every tracker of one store. */
export function trackerSeedsOf(store: ClusterView): TrackerSeeds {
  let seeds = registries.get(store);
  if (seeds === undefined) {
    seeds = new TrackerSeeds(store);
    registries.set(store, seeds);
  }
  return seeds;
}
