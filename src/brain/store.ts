// The cluster-wide store the sources write into: the selected Services, their EndpointSlices
// grouped by service, Nodes and the Service IP ranges. It tells listeners which services and nodes changed, in one
// batch per macrotask, and only once every source has synced.

import { isDeepStrictEqual } from "node:util";
import { type Clock, systemClock } from "../model/clock.ts";
import {
  type ClusterChange,
  type ClusterSink,
  type ClusterView,
  gatheringList,
  type ListWriter,
} from "../model/global.ts";
import {
  type EndpointSlice,
  type KubeKind,
  type KubeObject,
  type Node,
  objectKey,
  type Service,
  type ServiceCIDR,
  sliceServiceKey,
} from "../model/kube.ts";
import { type Logger, silentLogger } from "../observability/log.ts";
import { FallbackReturns } from "./fallback.ts";
import { isSelected, type ProxyNames } from "./selection.ts";
import { mergeServiceRanges } from "./service-ranges.ts";

export interface ClusterStoreOptions {
  /** Serve only objects labelled service.kubernetes.io/service-proxy-name=<this>; "" or unset: unlabelled ones. */
  readonly serviceProxyName?: string;
  /** Several names (one backend each), or every Service ("any"); replaces serviceProxyName. */
  readonly serviceProxyNames?: ProxyNames;
  readonly log?: Logger;
  /**
   * The cluster's Service IP ranges, fixed (--service-cidrs): ServiceCIDR objects are then ignored.
   * Unset: the ranges are those of the ServiceCIDR objects.
   */
  readonly serviceCIDRs?: readonly string[] | undefined;
  /** Times fallback return delays (see FallbackReturns); the system's monotonic clock by default. */
  readonly clock?: Clock;
  /**
   * Called once, just before the listeners get the first batch after sync: the sources' first
   * lists are all in the store, nothing has been computed from them yet, and what was parsed to
   * get them there is garbage. kpng collects the heap here (host/full-collection.ts).
   */
  readonly afterFirstLoad?: () => void;
}

const NO_SLICES: readonly EndpointSlice[] = Object.freeze([]);

/**
 * One service's EndpointSlices, by slice key, and as a list built on first read after a change.
 * Most services have one slice, held without a map until a second one comes: at 100k Services a
 * map each is ~15 MB that every collection marks.
 */
class SliceGroup {
  #onlyKey: string;
  #only: EndpointSlice | undefined;
  #byKey: Map<string, EndpointSlice> | undefined;
  list: readonly EndpointSlice[] | undefined;

  constructor(key: string, slice: EndpointSlice) {
    this.#onlyKey = key;
    this.#only = slice;
  }

  set(key: string, slice: EndpointSlice): void {
    this.list = undefined;
    if (this.#byKey !== undefined) this.#byKey.set(key, slice);
    else if (this.#only === undefined || this.#onlyKey === key) {
      this.#onlyKey = key;
      this.#only = slice;
    } else {
      this.#byKey = new Map([[this.#onlyKey, this.#only]]);
      this.#byKey.set(key, slice);
      this.#only = undefined;
    }
  }

  /** Takes the slice out; true when the group is empty afterwards. */
  delete(key: string): boolean {
    this.list = undefined;
    if (this.#byKey !== undefined) {
      this.#byKey.delete(key);
      return this.#byKey.size === 0;
    }
    if (this.#onlyKey === key) this.#only = undefined;
    return this.#only === undefined;
  }

  slices(): EndpointSlice[] {
    if (this.#byKey !== undefined) return [...this.#byKey.values()];
    return this.#only === undefined ? [] : [this.#only];
  }
}

export class ClusterStore implements ClusterSink, ClusterView {
  readonly #serviceProxyNames: ProxyNames;
  readonly #log: Logger;
  #services = new Map<string, Service>();
  #slices = new Map<string, EndpointSlice>();
  /** service key → its slices */
  readonly #slicesByService = new Map<string, SliceGroup>();
  #nodes = new Map<string, Node>();
  readonly #serviceCIDRObjects = new Map<string, ServiceCIDR>();
  readonly #fixedServiceCIDRs: readonly string[] | undefined;
  #serviceCIDRs: readonly string[];
  #pendingServiceCIDRs = false;
  readonly #listeners = new Set<(change: ClusterChange) => void>();
  #synced = false;
  #pendingServices = new Set<string>();
  #pendingNodes = new Set<string>();
  #flushScheduled = false;
  /** The sync batch is delivered even when the store is empty. */
  #syncBatchPending = false;
  readonly #fallback: FallbackReturns;
  readonly #afterFirstLoad: (() => void) | undefined;

  constructor(options: ClusterStoreOptions = {}) {
    this.#afterFirstLoad = options.afterFirstLoad;
    this.#fallback = new FallbackReturns(options.clock ?? systemClock, (key) => this.#serviceChanged(key));
    this.#serviceProxyNames = options.serviceProxyNames ?? [options.serviceProxyName ?? ""];
    this.#log = options.log ?? silentLogger;
    this.#fixedServiceCIDRs = options.serviceCIDRs;
    this.#serviceCIDRs = mergeServiceRanges(options.serviceCIDRs ?? []);
  }

  get isSynced(): boolean {
    return this.#synced;
  }

  /**
   * Batched: called at most once per macrotask with everything that changed. Nothing is reported
   * before sync; the batch at sync names every service and node in the store.
   */
  subscribe(listener: (change: ClusterChange) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  service(key: string): Service | undefined {
    return this.#services.get(key);
  }

  slicesOf(serviceKey: string): readonly EndpointSlice[] {
    const group = this.#slicesByService.get(serviceKey);
    if (group === undefined) return NO_SLICES;
    group.list ??= this.#fallback.filter(serviceKey, this.#services.get(serviceKey), group.slices());
    return group.list;
  }

  node(name: string): Node | undefined {
    return this.#nodes.get(name);
  }

  /** The cluster's Service IP ranges, merged (see mergeServiceRanges); empty when unknown. */
  serviceCIDRs(): readonly string[] {
    return this.#serviceCIDRs;
  }

  serviceCIDRObjects(): Iterable<ServiceCIDR> {
    return this.#serviceCIDRObjects.values();
  }

  services(): Iterable<Service> {
    return this.#services.values();
  }

  serviceKeys(): Iterable<string> {
    return this.#services.keys();
  }

  slices(): Iterable<EndpointSlice> {
    return this.#slices.values();
  }

  nodes(): Iterable<Node> {
    return this.#nodes.values();
  }

  upsert(object: KubeObject): void {
    const key = objectKey(object.metadata);
    if (!isSelected(object, this.#serviceProxyNames)) {
      this.delete(object.kind, key);
      return;
    }
    switch (object.kind) {
      case "Service":
        if (isDeepStrictEqual(this.#services.get(key), object)) return;
        this.#services.set(key, object);
        this.#serviceChanged(key);
        return;
      case "EndpointSlice":
        this.#upsertSlice(key, object);
        return;
      case "Node":
        if (isDeepStrictEqual(this.#nodes.get(key), object)) return;
        this.#nodes.set(key, object);
        this.#nodeChanged(key);
        return;
      case "ServiceCIDR":
        if (isDeepStrictEqual(this.#serviceCIDRObjects.get(key), object)) return;
        this.#serviceCIDRObjects.set(key, object);
        this.#rangesChanged();
        return;
    }
  }

  delete(kind: KubeKind, key: string): void {
    switch (kind) {
      case "Service":
        if (this.#services.delete(key)) this.#serviceChanged(key);
        return;
      case "EndpointSlice":
        this.#deleteSlice(key);
        return;
      case "Node":
        if (this.#nodes.delete(key)) this.#nodeChanged(key);
        return;
      case "ServiceCIDR":
        if (this.#serviceCIDRObjects.delete(key)) this.#rangesChanged();
        return;
    }
  }

  replace(kind: KubeKind, objects: readonly KubeObject[], keys?: readonly string[]): void {
    if (!this.#synced && this.#sizeOf(kind) === 0) {
      this.#load(kind, objects, keys);
      return;
    }
    const listed = new Set<string>();
    for (let i = 0; i < objects.length; i++) {
      const object = objects[i] as KubeObject;
      if (!this.#ofKind(kind, object)) continue;
      listed.add(keys?.[i] ?? objectKey(object.metadata));
      this.upsert(object);
    }
    for (const key of [...this.#keysOf(kind)]) {
      if (!listed.has(key)) this.delete(kind, key);
    }
  }

  replaceByKey(kind: KubeKind, byKey: Map<string, KubeObject>): void {
    if (this.#synced || this.#sizeOf(kind) !== 0 || kind === "ServiceCIDR") {
      this.replace(kind, [...byKey.values()], [...byKey.keys()]);
      return;
    }
    // The first list of a kind: the map becomes the store's own, without what #load would skip.
    for (const [key, object] of byKey) {
      if (!this.#ofKind(kind, object) || !isSelected(object, this.#serviceProxyNames)) byKey.delete(key);
    }
    switch (kind) {
      case "Service":
        this.#services = byKey as Map<string, Service>;
        for (const key of byKey.keys()) this.#forgetSliceList(key);
        return;
      case "EndpointSlice":
        this.#slices = byKey as Map<string, EndpointSlice>;
        for (const [key, slice] of this.#slices) this.#group(key, slice as EndpointSlice);
        return;
      case "Node":
        this.#nodes = byKey as Map<string, Node>;
        return;
    }
  }

  /**
   * The first list of a kind before sync goes into the maps page by page as it arrives (nobody
   * sees the store before sync, and an abandoned list is replaced by the next); any other list is
   * gathered and replaces the kind at once, so a relist is one consistent change.
   */
  startList(kind: KubeKind): ListWriter<KubeObject> {
    if (this.#synced || this.#sizeOf(kind) !== 0) return gatheringList(this, kind);
    return { add: (objects) => this.#load(kind, objects), commit: () => {} };
  }

  synced(): void {
    if (this.#synced) return;
    this.#synced = true;
    this.#syncBatchPending = true;
    this.#pendingServices = new Set(this.#services.keys());
    this.#pendingNodes = new Set(this.#nodes.keys());
    this.#log.debug({ services: this.#services.size, nodes: this.#nodes.size }, "store synced");
    this.#scheduleFlush();
  }

  /**
   * The first list of a kind, before sync: nothing to compare with, nobody to tell, nothing to
   * delete. The objects go into the maps as upserts would put them, without the bookkeeping.
   * `keys` are theirs when the caller has them (see ClusterSink.replace).
   */
  #load(kind: KubeKind, objects: readonly KubeObject[], keys?: readonly string[]): void {
    for (let i = 0; i < objects.length; i++) {
      const object = objects[i] as KubeObject;
      if (!this.#ofKind(kind, object) || !isSelected(object, this.#serviceProxyNames)) continue;
      const key = keys?.[i] ?? objectKey(object.metadata);
      switch (object.kind) {
        case "Service":
          this.#services.set(key, object);
          this.#forgetSliceList(key);
          break;
        case "Node":
          this.#nodes.set(key, object);
          break;
        case "EndpointSlice":
          if (this.#slices.has(key)) this.#upsertSlice(key, object);
          else this.#addSlice(key, object);
          break;
        case "ServiceCIDR":
          this.upsert(object);
          break;
      }
    }
  }

  /** Whether a listed object is of the list's kind; one that is not is skipped with a warning. */
  #ofKind(kind: KubeKind, object: KubeObject): boolean {
    if (object.kind === kind) return true;
    this.#log.warn({ kind, got: object.kind }, "replace: skipping object of another kind");
    return false;
  }

  #sizeOf(kind: KubeKind): number {
    switch (kind) {
      case "Service":
        return this.#services.size;
      case "EndpointSlice":
        return this.#slices.size;
      case "Node":
        return this.#nodes.size;
      case "ServiceCIDR":
        return this.#serviceCIDRObjects.size;
    }
  }

  #keysOf(kind: KubeKind): Iterable<string> {
    switch (kind) {
      case "Service":
        return this.#services.keys();
      case "EndpointSlice":
        return this.#slices.keys();
      case "Node":
        return this.#nodes.keys();
      case "ServiceCIDR":
        return this.#serviceCIDRObjects.keys();
    }
  }

  #upsertSlice(key: string, slice: EndpointSlice): void {
    const previous = this.#slices.get(key);
    if (isDeepStrictEqual(previous, slice)) return;
    if (previous !== undefined) this.#removeFromService(key, previous);
    this.#serviceChanged(this.#addSlice(key, slice));
  }

  /** Files a slice that is not in the store; returns its service's key. */
  #addSlice(key: string, slice: EndpointSlice): string {
    this.#slices.set(key, slice);
    return this.#group(key, slice);
  }

  /** Puts a slice of #slices in its service's group; returns the service's key. */
  #group(key: string, slice: EndpointSlice): string {
    const serviceKey = sliceServiceKey(slice);
    const group = this.#slicesByService.get(serviceKey);
    if (group === undefined) this.#slicesByService.set(serviceKey, new SliceGroup(key, slice));
    else group.set(key, slice);
    return serviceKey;
  }

  #deleteSlice(key: string): void {
    const previous = this.#slices.get(key);
    if (previous === undefined) return;
    this.#slices.delete(key);
    this.#removeFromService(key, previous);
  }

  /** Takes a slice out of its service's group; the service it belonged to has changed. */
  #removeFromService(key: string, slice: EndpointSlice): void {
    const serviceKey = sliceServiceKey(slice);
    const group = this.#slicesByService.get(serviceKey);
    if (group?.delete(key)) this.#slicesByService.delete(serviceKey);
    this.#serviceChanged(serviceKey);
  }

  /** The slices in effect depend on the Service (its fallback annotations) and on time. */
  #forgetSliceList(key: string): void {
    // None are in yet while a first list of Services comes in before the slices.
    if (this.#slicesByService.size === 0) return;
    const group = this.#slicesByService.get(key);
    if (group !== undefined) group.list = undefined;
  }

  #serviceChanged(key: string): void {
    this.#forgetSliceList(key);
    if (!this.#synced) return;
    this.#pendingServices.add(key);
    this.#scheduleFlush();
  }

  /** A ServiceCIDR object changed: the merged ranges may too (unless fixed). */
  #rangesChanged(): void {
    if (this.#fixedServiceCIDRs === undefined) {
      const next = mergeServiceRanges([...this.#serviceCIDRObjects.values()].flatMap((o) => o.cidrs));
      const current = this.#serviceCIDRs;
      const same = next.length === current.length && next.every((c, i) => c === current[i]);
      // The same array object while equal: consumers compare by identity.
      if (!same) this.#serviceCIDRs = next;
    }
    if (!this.#synced) return;
    this.#pendingServiceCIDRs = true;
    this.#scheduleFlush();
  }

  #nodeChanged(name: string): void {
    if (!this.#synced) return;
    this.#pendingNodes.add(name);
    this.#scheduleFlush();
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => this.flush());
  }

  /**
   * Delivers the pending batch now. The store calls this itself once per macrotask; a caller
   * that drives the store synchronously (a benchmark, a test) may call it directly.
   */
  flush(): void {
    this.#flushScheduled = false;
    if (
      this.#pendingServices.size === 0 &&
      this.#pendingNodes.size === 0 &&
      !this.#pendingServiceCIDRs &&
      !this.#syncBatchPending
    )
      return;
    // The sync batch is the first batch, and there is one (synced() sets it once).
    if (this.#syncBatchPending) this.#afterFirstLoad?.();
    const change: ClusterChange = {
      services: this.#pendingServices,
      nodes: this.#pendingNodes,
      serviceCIDRs: this.#pendingServiceCIDRs || this.#syncBatchPending,
    };
    this.#syncBatchPending = false;
    this.#pendingServices = new Set();
    this.#pendingNodes = new Set();
    this.#pendingServiceCIDRs = false;
    for (const listener of [...this.#listeners]) {
      try {
        listener(change);
      } catch (err) {
        this.#log.error({ err }, "store listener failed");
      }
    }
  }
}
