// The ops that take a client from one LocalState to another, in kpng's order: services set
// first (so no endpoint arrives before its service), endpoint deletes before endpoint sets,
// service deletes last (so no endpoint is orphaned early). Endpoint ops are grouped by service
// (services in key order, each service's endpoints in path order; deletes in reverse), so a
// full state needs one sort of the service keys, not one of every endpoint path.

import { sameStrings } from "../brain/local-equal.ts";
import { TwoGenerations } from "../lib/two-generations.ts";
import type { LocalEndpoint, LocalService, LocalState } from "../model/local.ts";
import {
  concatFrames,
  deleteFrame,
  type Frame,
  sameBytes,
  setFrame,
  type WireValue,
  wireValue,
} from "./frames.ts";
import { FullStateSegments } from "./full-state-segments.ts";
import { type Endpoint, NodeInfo, ServiceCIDRs, Set as WireSet } from "./gen/api/localv1/api.ts";
import { KeyOrder } from "./key-order.ts";
import {
  encodeEndpointBytes,
  encodeServiceBytes,
  encodeServiceValue,
  endpointDescriptor,
  endpointValueOf,
  gatherEndpoints,
  sameServiceValue,
} from "./local-codec.ts";

/** A service's wire values. Cached per LocalService object: unchanged services keep theirs. */
class EncodedService {
  readonly service: WireValue;
  /** Every endpoint's Set op in path order, in one buffer: what a full state sends. */
  readonly endpointSets: Frame;
  /** The endpoints' paths "ns/svc/<ip>" in ascending order, and their values. */
  readonly paths: readonly string[];
  readonly values: readonly WireValue[];
  #byPath: Map<string, WireValue> | undefined;

  constructor(
    service: WireValue,
    endpointSets: Frame,
    paths: readonly string[],
    values: readonly WireValue[],
  ) {
    this.service = service;
    this.endpointSets = endpointSets;
    this.paths = paths;
    this.values = values;
  }

  /**
   * By endpoint path, iterated in ascending path order. Built when first asked for: a change set
   * compares endpoints by path, a full state (most of the encodings) never does.
   */
  get endpoints(): ReadonlyMap<string, WireValue> {
    if (this.#byPath === undefined) {
      this.#byPath = new Map();
      for (let i = 0; i < this.paths.length; i++) this.#byPath.set(this.paths[i]!, this.values[i]!);
    }
    return this.#byPath;
  }
}

const cache = new WeakMap<LocalService, EncodedService>();

/**
 * Endpoint values by path and descriptor, shared between the LocalService objects of different
 * nodes (a node that runs one of a service's endpoints has its own object, equal to other
 * nodes' but for that endpoint). Two generations bound it, so what every node still uses
 * stays cached.
 */
const endpointValues = new TwoGenerations<WireValue>(131_072);

function endpointValue(path: string, descriptor: string, endpoint: () => Endpoint): WireValue {
  const id = `${path}\0${descriptor}`;
  let value = endpointValues.get(id);
  if (value === undefined) {
    value = wireValue(WireSet.EndpointsSet, path, encodeEndpointBytes(endpoint()));
    endpointValues.set(id, value);
  }
  return value;
}

/**
 * The latest encoding of each service key, with what its values were made from. A node's own
 * LocalService differs from its zone's in the endpoint it runs and one count, so it takes every
 * other value from here: ~100k such own services were most of the encoding of a full state to
 * 1,000 nodes. Bounded like endpointValues.
 */
interface LastEncoding {
  readonly svc: LocalService;
  readonly encoded: EncodedService;
  /** The endpoint IPs in path order (the encoding's paths and values), and each one's descriptor. */
  readonly ips: readonly string[];
  readonly descriptors: readonly string[];
}

const lastEncodings = new TwoGenerations<LastEncoding>(65_536);

/** Whether the gathered endpoints are of exactly these IPs. */
function sameIPs(gathered: ReadonlyMap<string, unknown>, ips: readonly string[]): boolean {
  if (gathered.size !== ips.length) return false;
  for (const ip of ips) if (!gathered.has(ip)) return false;
  return true;
}

const sameFlags = (a: LocalEndpoint, b: LocalEndpoint) =>
  a.local === b.local && a.ready === b.ready && a.serving === b.serving && a.terminating === b.terminating;

/** More IPs than this looked at one by one: the service is encoded anew instead. */
const MAX_CHANGED_IPS = 16;

/**
 * The endpoint IPs whose values may differ between two services of one key, when few do: an IP
 * has the same value in both when every list (each port's internal and external endpoints)
 * holds it in the same places with the same flags. Lists laid out alike (the same IPs and
 * target ports in the same places) name only the IPs whose flags differ; lists laid out
 * otherwise name all their IPs. Undefined when the ports differ or more than MAX_CHANGED_IPS
 * IPs would be named. No string or object per endpoint: a node's own service is its zone's but
 * for one endpoint's flags, or one endpoint more or less in the external list.
 */
function changedIPs(a: LocalService, b: LocalService): string[] | undefined {
  if (a.ports.length !== b.ports.length) return undefined;
  const changed: string[] = [];
  const add = (ip: string): boolean => {
    if (!changed.includes(ip)) changed.push(ip);
    return changed.length <= MAX_CHANGED_IPS;
  };
  const compare = (x: readonly LocalEndpoint[], y: readonly LocalEndpoint[]): boolean => {
    let alike = x.length === y.length;
    for (let i = 0; alike && i < x.length; i++) alike = x[i]!.ip === y[i]!.ip && x[i]!.port === y[i]!.port;
    if (!alike) {
      for (const ep of x) if (!add(ep.ip)) return false;
      for (const ep of y) if (!add(ep.ip)) return false;
      return true;
    }
    for (let i = 0; i < x.length; i++) if (!sameFlags(x[i]!, y[i]!) && !add(x[i]!.ip)) return false;
    return true;
  };
  for (let i = 0; i < a.ports.length; i++) {
    const p = a.ports[i]!;
    const q = b.ports[i]!;
    if (p.name !== q.name) return undefined;
    if (!compare(p.internalEndpoints, q.internalEndpoints)) return undefined;
    if (!compare(p.externalEndpoints, q.externalEndpoints)) return undefined;
  }
  return changed;
}

/** The encoding of these endpoint values, remembered as the last of its key. */
function remembered(
  key: string,
  svc: LocalService,
  last: LastEncoding | undefined,
  ips: readonly string[],
  descriptors: readonly string[],
  paths: readonly string[],
  values: readonly WireValue[],
): EncodedService {
  const lastValues = last?.encoded.values;
  const sameValues = lastValues?.length === values.length && values.every((v, i) => v === lastValues[i]);
  const encoded = new EncodedService(
    last !== undefined && sameServiceValue(last.svc, svc)
      ? last.encoded.service
      : wireValue(WireSet.ServicesSet, key, encodeServiceBytes(encodeServiceValue(svc))),
    // One buffer for the full state, which sends every endpoint.
    sameValues && last !== undefined ? last.encoded.endpointSets : concatFrames(values.map((v) => v.frame)),
    paths,
    values,
  );
  lastEncodings.set(key, { svc, encoded, ips, descriptors });
  return encoded;
}

/**
 * The encoding of a service of the same endpoint IPs as the last one of its key, of which only
 * the `changed` ones are looked at; undefined when they are not the same IPs.
 */
function encodedLike(
  key: string,
  svc: LocalService,
  last: LastEncoding,
  changed: readonly string[],
): EncodedService | undefined {
  let descriptors = last.descriptors;
  let values = last.encoded.values;
  for (const ip of changed) {
    // An IP in a list of one service only (in neither list of the other): the IPs differ.
    const i = last.ips.indexOf(ip);
    const endpoint = gatherEndpoints(svc, ip).get(ip);
    if (i === -1 || endpoint === undefined) return undefined;
    const descriptor = endpointDescriptor(endpoint);
    if (descriptor === descriptors[i]) continue;
    if (descriptors === last.descriptors) {
      descriptors = [...descriptors];
      values = [...values];
    }
    (descriptors as string[])[i] = descriptor;
    (values as WireValue[])[i] = endpointValue(last.encoded.paths[i]!, descriptor, () =>
      endpointValueOf(ip, endpoint),
    );
  }
  return remembered(key, svc, last, last.ips, descriptors, last.encoded.paths, values);
}

export function encodedService(svc: LocalService): EncodedService {
  const cached = cache.get(svc);
  if (cached !== undefined) return cached;
  const key = `${svc.namespace}/${svc.name}`;
  const last = lastEncodings.get(key);
  let encoded: EncodedService | undefined;
  if (last !== undefined) {
    const changed = changedIPs(svc, last.svc);
    if (changed !== undefined) encoded = encodedLike(key, svc, last, changed);
  }
  encoded ??= encodedAnew(key, svc, last);
  cache.set(svc, encoded);
  return encoded;
}

/** The encoding of a service whose endpoints are laid out unlike the last one's of its key. */
function encodedAnew(key: string, svc: LocalService, last: LastEncoding | undefined): EncodedService {
  const gathered = gatherEndpoints(svc);
  const alike = last !== undefined && sameIPs(gathered, last.ips);
  const ips = alike ? last.ips : [...gathered.keys()].sort();
  const paths = new Array<string>(ips.length);
  const descriptors = new Array<string>(ips.length);
  const values = new Array<WireValue>(ips.length);
  for (let i = 0; i < ips.length; i++) {
    const ip = ips[i]!;
    const endpoint = gathered.get(ip)!;
    const descriptor = endpointDescriptor(endpoint);
    if (alike && last.descriptors[i] === descriptor) {
      paths[i] = last.encoded.paths[i]!;
      values[i] = last.encoded.values[i]!;
    } else {
      const path = `${key}/${ip}`;
      paths[i] = path;
      values[i] = endpointValue(path, descriptor, () => endpointValueOf(ip, endpoint));
    }
    descriptors[i] = descriptor;
  }
  return remembered(key, svc, last, ips, descriptors, paths, values);
}

/** What changed between two states, service by service. */
export interface LocalDelta {
  /** Keys of services that may differ; others are known to be identical. */
  readonly keys: Iterable<string>;
  before(key: string): LocalService | undefined;
  after(key: string): LocalService | undefined;
  /** The Service IP ranges before and after; absent when they did not change. */
  readonly serviceCIDRs?: { readonly before: readonly string[]; readonly after: readonly string[] };
  /** The Node's facts before and after; absent when they did not change. */
  readonly node?: { readonly before: NodeFacts | undefined; readonly after: NodeFacts | undefined };
}

/** What the wire carries of the Node (NodeInfoSet): a state's nodeIPs and nodePodCIDRs. */
export interface NodeFacts {
  readonly ips: readonly string[];
  readonly podCIDRs: readonly string[];
}

/** A state's Node facts; undefined when its producer does not know them. */
export function nodeFactsOf(state: LocalState | undefined): NodeFacts | undefined {
  if (state?.nodeIPs === undefined && state?.nodePodCIDRs === undefined) return undefined;
  return { ips: state.nodeIPs ?? [], podCIDRs: state.nodePodCIDRs ?? [] };
}

const sameNodeFacts = (a: NodeFacts | undefined, b: NodeFacts | undefined) =>
  a === b ||
  (a !== undefined && b !== undefined && sameStrings(a.ips, b.ips) && sameStrings(a.podCIDRs, b.podCIDRs));

/** The path of the one NodeInfoSet value. */
const NODE_INFO_PATH = "node";

/** The op that gives a client the Node's facts: a Set (empty lists too), or a Delete when unknown. */
function nodeInfoFrame(node: NodeFacts | undefined): Frame {
  if (node === undefined) return deleteFrame(WireSet.NodeInfoSet, NODE_INFO_PATH);
  const info = NodeInfo.encode({ PrimaryIPs: [...node.ips], PodCIDRs: [...node.podCIDRs] }).finish();
  return setFrame(WireSet.NodeInfoSet, NODE_INFO_PATH, info);
}

/** The path of the one ServiceCIDRsSet value. */
const SERVICE_CIDRS_PATH = "service-cidrs";

/** The op that gives a client these ranges: a Set, or a Delete when there are none. */
function serviceCIDRsFrame(cidrs: readonly string[]): Frame {
  if (cidrs.length === 0) return deleteFrame(WireSet.ServiceCIDRsSet, SERVICE_CIDRS_PATH);
  return setFrame(
    WireSet.ServiceCIDRsSet,
    SERVICE_CIDRS_PATH,
    ServiceCIDRs.encode({ CIDRs: [...cidrs] }).finish(),
  );
}

/** Between two whole states: every key of either, compared by identity. */
export function fullDelta(
  before: ReadonlyMap<string, LocalService>,
  after: ReadonlyMap<string, LocalService>,
  serviceCIDRs?: LocalDelta["serviceCIDRs"],
): LocalDelta {
  const keys = new Set<string>();
  for (const [k, v] of after) if (before.get(k) !== v) keys.add(k);
  for (const k of before.keys()) if (!after.has(k)) keys.add(k);
  return {
    keys,
    before: (k) => before.get(k),
    after: (k) => after.get(k),
    ...(serviceCIDRs && { serviceCIDRs }),
  };
}

interface ServiceChange {
  readonly key: string;
  readonly old: EncodedService | undefined;
  readonly cur: EncodedService | undefined;
}

const NO_ENDPOINTS: ReadonlyMap<string, WireValue> = new Map();

/** The Set/Delete ops of one change set (without Reset or Sync). */
export function localChangeFrames(delta: LocalDelta): Frame[] {
  const changes: ServiceChange[] = [];
  for (const key of delta.keys) {
    const old = delta.before(key);
    const cur = delta.after(key);
    if (old === cur) continue;
    changes.push({
      key,
      old: old === undefined ? undefined : encodedService(old),
      cur: cur === undefined ? undefined : encodedService(cur),
    });
  }
  changes.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const out: Frame[] = [];
  const ranges = delta.serviceCIDRs;
  if (ranges !== undefined && !sameStrings(ranges.before, ranges.after))
    out.push(serviceCIDRsFrame(ranges.after));
  const node = delta.node;
  if (node !== undefined && !sameNodeFacts(node.before, node.after)) out.push(nodeInfoFrame(node.after));
  for (const { old, cur } of changes) {
    if (cur !== undefined && (old === undefined || !sameBytes(old.service.bytes, cur.service.bytes)))
      out.push(cur.service.frame);
  }
  for (let i = changes.length - 1; i >= 0; i--) {
    const { old, cur } = changes[i]!;
    if (old === undefined) continue;
    const now = cur?.endpoints ?? NO_ENDPOINTS;
    const gone = [...old.endpoints.keys()].filter((path) => !now.has(path));
    for (let j = gone.length - 1; j >= 0; j--) out.push(deleteFrame(WireSet.EndpointsSet, gone[j]!));
  }
  for (const { old, cur } of changes) {
    if (cur === undefined) continue;
    for (const [path, value] of cur.endpoints) {
      const previous = old?.endpoints.get(path);
      if (previous === undefined || !sameBytes(previous.bytes, value.bytes)) out.push(value.frame);
    }
  }
  for (let i = changes.length - 1; i >= 0; i--) {
    const { key, old, cur } = changes[i]!;
    if (cur === undefined && old !== undefined) out.push(deleteFrame(WireSet.ServicesSet, key));
  }
  return out;
}

/** A number per LocalService object, never reused: a delta's identity names its objects by these. */
const objectIds = new WeakMap<LocalService, number>();
let lastObjectId = 0;

function objectId(svc: LocalService | undefined): number {
  if (svc === undefined) return 0;
  let id = objectIds.get(svc);
  if (id === undefined) {
    id = ++lastObjectId;
    objectIds.set(svc, id);
  }
  return id;
}

/**
 * Change sets by their delta's identity. Bounded like the encodings: a change reaches every node
 * within one generation, and an entry naming objects that are gone is never asked for again.
 */
const sharedChanges = new TwoGenerations<readonly Frame[]>(4096);

/**
 * What the ops of `delta` are made of: each changed key with its objects before and after, and
 * the ranges and Node facts when they changed. Two deltas with the same identity have the same
 * ops; undefined for a delta too large to be worth naming (a resync of many services).
 */
function deltaIdentity(keys: readonly string[], delta: LocalDelta): string | undefined {
  let id = "";
  let count = 0;
  for (const key of keys) {
    const before = delta.before(key);
    const after = delta.after(key);
    if (before === after) continue;
    if (++count > MAX_SHARED_CHANGES) return undefined;
    // NUL is in no service key (namespace/name).
    id += `${key}\0${objectId(before)}\0${objectId(after)}\0`;
  }
  const ranges = delta.serviceCIDRs;
  if (ranges !== undefined && !sameStrings(ranges.before, ranges.after))
    id += `\x01${ranges.after.join(",")}`;
  const node = delta.node;
  if (node !== undefined && !sameNodeFacts(node.before, node.after)) {
    const after = node.after;
    id += after === undefined ? "\x02" : `\x02${after.ips.join(",")};${after.podCIDRs.join(",")}`;
  }
  return id;
}

/** Changes of more services than this are encoded for their node alone. */
const MAX_SHARED_CHANGES = 64;

/**
 * The ops of `delta` (localChangeFrames), shared by every node whose delta is made of the same
 * objects: one endpoint change reaches ~1,000 nodes, most of which hold the same service objects
 * before and after it, so the change set is built once for them all. The list is shared: read it,
 * never change it.
 */
export function sharedChangeFrames(delta: LocalDelta): readonly Frame[] {
  // The keys are read twice (identity, then ops), and may come as a one-pass iterator.
  const keys = Array.isArray(delta.keys) ? delta.keys : [...delta.keys];
  const id = deltaIdentity(keys, delta);
  if (id === undefined) return localChangeFrames({ ...delta, keys });
  let frames = sharedChanges.get(id);
  if (frames === undefined) {
    frames = Object.freeze(localChangeFrames({ ...delta, keys }));
    sharedChanges.set(id, frames);
  }
  return frames;
}

/** Shared by every node: their maps nearly always hold the same keys, sorted once. */
const fullStateOrder = new KeyOrder();
/** Shared by every node: runs of services that nodes hold alike are built once. */
const fullStateSegments = new FullStateSegments((svc) => {
  const e = encodedService(svc);
  return { service: e.service.frame, endpointSets: e.endpointSets };
});

/**
 * The Set ops of a whole state: the Service IP ranges, the Node's facts when known, every
 * service, every service's endpoints.
 */
export function localFullFrames(
  services: ReadonlyMap<string, LocalService>,
  serviceCIDRs: readonly string[] = [],
  node?: NodeFacts,
): Frame[] {
  const out: Frame[] = [];
  if (serviceCIDRs.length > 0) out.push(serviceCIDRsFrame(serviceCIDRs));
  if (node !== undefined) out.push(nodeInfoFrame(node));
  const frames = fullStateSegments.frames(fullStateOrder.sortedValues(services));
  for (const f of frames.services) out.push(f);
  for (const f of frames.endpoints) out.push(f);
  return out;
}
