// The global (cluster-wide) model as sources deliver it: validated objects, keyed and typed.

import type { EndpointSlice, KubeKind, KubeObject, Node, Service, ServiceCIDR } from "./kube.ts";

/** Where a source delivers what it reads. The brain's ClusterStore implements it. */
export interface ClusterSink {
  /** Adds or replaces one object. */
  upsert(object: KubeObject): void;
  /** Removes one object by its key ("namespace/name", or the name for a Node). */
  delete(kind: KubeKind, key: string): void;
  /**
   * Replaces every object of a kind, as after a (re)list: objects missing from the list are
   * deleted. `keys`, when the caller has them, are the objects' keys in their order (objectKey):
   * the sink then makes none of its own.
   */
  replace(kind: KubeKind, objects: readonly KubeObject[], keys?: readonly string[]): void;
  /**
   * replace() with the objects in a map by key (objectKey). The sink may keep the map as its own
   * and change it: the caller gives it up. A store's first list then goes in without being
   * filed again (a file source's 100k Services and slices).
   */
  replaceByKey?(kind: KubeKind, byKey: Map<string, KubeObject>): void;
  /**
   * A list taken page by page as the pages arrive, for a source that reads in pages; without it,
   * such a source gathers the pages and calls replace().
   */
  startList?(kind: KubeKind): ListWriter<KubeObject>;
  /**
   * Every kind the source watches has been listed at least once. Nothing is computed for a node
   * before this; a source calls it once, after its first complete read.
   */
  synced(): void;
}

/** One list on its way into a sink: `add` for each page, `commit` once the last page is in. */
export interface ListWriter<T> {
  add(objects: readonly T[]): void;
  /** Replaces the kind with everything added; a list never committed is replaced by the next. */
  commit(): void;
}

/** A ListWriter that gathers the pages and replaces the kind at the end. */
export function gatheringList<K extends string, T>(
  sink: { replace(kind: K, objects: readonly T[]): void },
  kind: K,
): ListWriter<T> {
  const all: T[] = [];
  return {
    add: (objects) => {
      for (const object of objects) all.push(object);
    },
    commit: () => sink.replace(kind, all),
  };
}

/** A source of cluster objects: the Kubernetes API, a file, or another brain's global API. */
export interface ClusterSource {
  /** Starts reading into the sink. Resolves once started; reading goes on until stop(). */
  start(sink: ClusterSink): Promise<void>;
  stop(): Promise<void>;
}

/** What changed in one batch of a ClusterView. */
export interface ClusterChange {
  /** "ns/name" of services whose Service or EndpointSlices changed. */
  readonly services: ReadonlySet<string>;
  /** Names of nodes whose Node object changed. */
  readonly nodes: ReadonlySet<string>;
  /** ServiceCIDR objects changed; serviceCIDRs() (the merged ranges) may or may not have. */
  readonly serviceCIDRs: boolean;
}

/**
 * The cluster as the brain holds it, read-only: what the brain's computation, global sinks and
 * the global API read. The brain's ClusterStore implements it.
 */
export interface ClusterView {
  /** Every kind has been listed once; nothing is computed before. */
  readonly isSynced: boolean;
  /**
   * Batched: called at most once per macrotask with everything that changed. Nothing is reported
   * before sync; the batch at sync names every service and node.
   */
  subscribe(listener: (change: ClusterChange) => void): () => void;
  service(key: string): Service | undefined;
  slicesOf(serviceKey: string): readonly EndpointSlice[];
  node(name: string): Node | undefined;
  services(): Iterable<Service>;
  /** The keys ("namespace/name") of services(), in the same order. */
  serviceKeys(): Iterable<string>;
  slices(): Iterable<EndpointSlice>;
  nodes(): Iterable<Node>;
  serviceCIDRObjects(): Iterable<ServiceCIDR>;
  /** The cluster's Service IP ranges, merged: IPv4 first, then by address, none inside another. */
  serviceCIDRs(): readonly string[];
}
