// The global state as globalv1 serves it: one unit per service (the Service and its
// EndpointSlices), per node and per ServiceCIDR, a server-wide revision, and a bounded log of the units that
// changed, from which each stream (or resuming client) gets its delta.

import type { ClusterView } from "../model/global.ts";
import {
  type EndpointSlice,
  type Node,
  objectKey,
  type Service,
  type ServiceCIDR,
  sliceServiceKey,
} from "../model/kube.ts";
import { deleteFrame, type Frame, sameBytes, type WireValue, wireValue } from "./frames.ts";
import { FullStateCache } from "./full-state-cache.ts";
import { Set as WireSet } from "./gen/api/localv1/api.ts";
import {
  encodeEndpointInfos,
  encodeEndpointSliceInfo,
  encodeNodeInfo,
  encodeServiceCIDRInfo,
  encodeServiceInfo,
} from "./global-codec.ts";
import type { Revisioned } from "./revision-session.ts";

type GlobalUnit =
  | {
      readonly kind: "service";
      readonly service: Service | undefined;
      readonly slices: readonly EndpointSlice[];
    }
  | { readonly kind: "node"; readonly node: Node }
  | { readonly kind: "serviceCIDR"; readonly serviceCIDR: ServiceCIDR };

/** kpng clients get one EndpointInfo per endpoint; ours ask for whole slices. */
export type GlobalFlavor = "kpng" | "objects";

interface Entry {
  readonly set: WireSet;
  readonly value: WireValue;
}

const caches: Record<GlobalFlavor, WeakMap<GlobalUnit, ReadonlyMap<string, Entry>>> = {
  kpng: new WeakMap(),
  objects: new WeakMap(),
};

function entriesOf(unit: GlobalUnit, flavor: GlobalFlavor): ReadonlyMap<string, Entry> {
  let entries = caches[flavor].get(unit);
  if (entries !== undefined) return entries;
  const out = new Map<string, Entry>();
  const add = (set: WireSet, path: string, bytes: Uint8Array) =>
    out.set(path, { set, value: wireValue(set, path, bytes) });
  if (unit.kind === "node") {
    add(WireSet.GlobalNodeInfos, `|${unit.node.metadata.name}||`, encodeNodeInfo(unit.node));
  } else if (unit.kind === "serviceCIDR") {
    // kpng clients know no such set: only clients asking for whole objects get it.
    const o = unit.serviceCIDR;
    if (flavor === "objects")
      add(WireSet.GlobalServiceCIDRs, `|${o.metadata.name}||`, encodeServiceCIDRInfo(o));
  } else {
    const s = unit.service;
    if (s !== undefined)
      add(WireSet.GlobalServiceInfos, `${s.metadata.namespace}|${s.metadata.name}||`, encodeServiceInfo(s));
    for (const slice of unit.slices) {
      const prefix = `${slice.metadata.namespace}|${slice.serviceName}|${slice.metadata.name}|`;
      if (flavor === "objects") add(WireSet.GlobalEndpointSlices, prefix, encodeEndpointSliceInfo(slice));
      else
        for (const [key, bytes] of encodeEndpointInfos(slice))
          add(WireSet.GlobalEndpointInfos, prefix + key, bytes);
    }
  }
  entries = out;
  caches[flavor].set(unit, entries);
  return entries;
}

// kpng's global order: nodes set, services set, endpoints set, endpoints deleted, services
// deleted, nodes deleted.
const setRank = new Map<WireSet, number>([
  [WireSet.GlobalNodeInfos, 0],
  [WireSet.GlobalServiceCIDRs, 0],
  [WireSet.GlobalServiceInfos, 1],
  [WireSet.GlobalEndpointInfos, 2],
  [WireSet.GlobalEndpointSlices, 2],
]);

function changeFrames(
  keys: Iterable<string>,
  before: (k: string) => GlobalUnit | undefined,
  after: (k: string) => GlobalUnit | undefined,
  flavor: GlobalFlavor,
): Frame[] {
  const sets: [number, string, Frame][] = [];
  const deletes: [number, string, Frame][] = [];
  const none: ReadonlyMap<string, Entry> = new Map();
  for (const key of keys) {
    const old = before(key);
    const cur = after(key);
    if (old === cur) continue;
    const oldEntries = old === undefined ? none : entriesOf(old, flavor);
    const curEntries = cur === undefined ? none : entriesOf(cur, flavor);
    for (const [path, e] of curEntries) {
      const prev = oldEntries.get(path);
      if (prev === undefined || !sameBytes(prev.value.bytes, e.value.bytes)) {
        sets.push([setRank.get(e.set) ?? 3, path, e.value.frame]);
      }
    }
    for (const [path, e] of oldEntries) {
      if (!curEntries.has(path)) deletes.push([setRank.get(e.set) ?? 3, path, deleteFrame(e.set, path)]);
    }
  }
  const byRankThenPath = (a: [number, string, Frame], b: [number, string, Frame]) =>
    a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0);
  sets.sort(byRankThenPath);
  deletes.sort((a, b) => -byRankThenPath(a, b));
  return [...sets, ...deletes].map(([, , f]) => f);
}

interface LogEntry {
  readonly from: number;
  readonly previous: ReadonlyMap<string, GlobalUnit | undefined>;
}

interface GlobalHubOptions {
  readonly maxLogRevisions?: number;
  readonly maxLogEntries?: number;
  /** Where encoded full states are kept and shared; the server shares one between its hubs. */
  readonly fullStates?: FullStateCache;
}

/** Shared by every globalv1 stream; one per server. */
export class GlobalStates {
  readonly #store: ClusterView;
  readonly #units = new Map<string, GlobalUnit>();
  readonly #log: LogEntry[] = [];
  #logEntries = 0;
  #revision: number | undefined;
  readonly #listeners = new Set<() => void>();
  readonly #unsubscribe: () => void;
  readonly #maxRevisions: number;
  readonly #maxEntries: number;
  readonly #nextRevision: () => number;
  readonly #fullStates: FullStateCache;
  /** One key per flavor: each flavor's full state is encoded once per revision. */
  readonly #flavorKeys: Readonly<Record<GlobalFlavor, object>> = { kpng: {}, objects: {} };

  constructor(store: ClusterView, nextRevision: () => number, options: GlobalHubOptions = {}) {
    this.#store = store;
    this.#fullStates = options.fullStates ?? new FullStateCache();
    this.#nextRevision = nextRevision;
    this.#maxRevisions = options.maxLogRevisions ?? 256;
    this.#maxEntries = options.maxLogEntries ?? 50_000;
    this.#unsubscribe = store.subscribe((change) =>
      this.#apply(change.services, change.nodes, change.serviceCIDRs),
    );
    if (store.isSynced) this.#loadAll();
  }

  get revision(): number | undefined {
    return this.#revision;
  }

  view(flavor: GlobalFlavor): Revisioned {
    const states = this;
    return {
      get revision() {
        return states.revision;
      },
      onChange: (l) => this.onChange(l),
      framesSince: (rev) => this.framesSince(rev, flavor),
      allFrames: () =>
        this.#fullStates.frames(this.#flavorKeys[flavor], this.#revision ?? 0, () =>
          changeFrames(
            this.#units.keys(),
            () => undefined,
            (k) => this.#units.get(k),
            flavor,
          ),
        ),
    };
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  framesSince(revision: number, flavor: GlobalFlavor): Frame[] | undefined {
    if (this.#revision === undefined) return undefined;
    if (revision === this.#revision) return [];
    const start = this.#log.findIndex((e) => e.from === revision);
    if (start < 0) return undefined;
    const before = new Map<string, GlobalUnit | undefined>();
    for (let i = start; i < this.#log.length; i++) {
      for (const [k, v] of this.#log[i]?.previous ?? []) if (!before.has(k)) before.set(k, v);
    }
    return changeFrames(
      before.keys(),
      (k) => before.get(k),
      (k) => this.#units.get(k),
      flavor,
    );
  }

  close(): void {
    this.#unsubscribe();
  }

  #loadAll(): void {
    const services = new Set<string>();
    for (const s of this.#store.services()) services.add(objectKey(s.metadata));
    for (const s of this.#store.slices()) services.add(sliceServiceKey(s));
    const nodes = new Set<string>();
    for (const n of this.#store.nodes()) nodes.add(n.metadata.name);
    this.#apply(services, nodes, true);
  }

  #apply(services: ReadonlySet<string>, nodes: ReadonlySet<string>, serviceCIDRs: boolean): void {
    const previous = new Map<string, GlobalUnit | undefined>();
    if (serviceCIDRs) this.#applyServiceCIDRs(previous);
    for (const key of services) {
      const unitKey = `svc:${key}`;
      const old = this.#units.get(unitKey);
      const service = this.#store.service(key);
      const slices = this.#store.slicesOf(key);
      if (old?.kind === "service" && old.service === service && old.slices === slices) continue;
      previous.set(unitKey, old);
      if (service === undefined && slices.length === 0) this.#units.delete(unitKey);
      else this.#units.set(unitKey, { kind: "service", service, slices });
    }
    for (const name of nodes) {
      const unitKey = `node:${name}`;
      const old = this.#units.get(unitKey);
      const node = this.#store.node(name);
      if (old?.kind === "node" ? old.node === node : node === undefined) continue;
      previous.set(unitKey, old);
      if (node === undefined) this.#units.delete(unitKey);
      else this.#units.set(unitKey, { kind: "node", node });
    }
    const first = this.#revision === undefined;
    if (!first && previous.size === 0) return;
    const revision = this.#nextRevision();
    if (!first) {
      this.#log.push({ from: this.#revision!, previous });
      this.#logEntries += previous.size;
      while (this.#log.length > this.#maxRevisions || this.#logEntries > this.#maxEntries) {
        const dropped = this.#log.shift();
        if (dropped === undefined) break;
        this.#logEntries -= dropped.previous.size;
      }
    }
    this.#revision = revision;
    for (const key of Object.values(this.#flavorKeys)) this.#fullStates.forget(key);
    for (const l of [...this.#listeners]) l();
  }

  /** ServiceCIDRs are few: every one is compared when any changed. */
  #applyServiceCIDRs(previous: Map<string, GlobalUnit | undefined>): void {
    const seen = new Set<string>();
    for (const o of this.#store.serviceCIDRObjects()) {
      const unitKey = `cidr:${o.metadata.name}`;
      seen.add(unitKey);
      const old = this.#units.get(unitKey);
      if (old?.kind === "serviceCIDR" && old.serviceCIDR === o) continue;
      previous.set(unitKey, old);
      this.#units.set(unitKey, { kind: "serviceCIDR", serviceCIDR: o });
    }
    for (const [unitKey, unit] of this.#units) {
      if (unit.kind !== "serviceCIDR" || seen.has(unitKey)) continue;
      previous.set(unitKey, unit);
      this.#units.delete(unitKey);
    }
  }
}
