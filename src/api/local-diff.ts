// The ops that take a client from one LocalState to another, in kpng's order: services set
// first (so no endpoint arrives before its service), endpoint deletes before endpoint sets,
// service deletes last (so no endpoint is orphaned early).

import type { LocalService } from "../model/local.ts";
import { deleteFrame, type Frame, sameBytes, type WireValue, wireValue } from "./frames.ts";
import { Set as WireSet } from "./gen/api/localv1/api.ts";
import { encodeEndpointBytes, encodeLocalService, encodeServiceBytes } from "./local-codec.ts";

/** A service's wire values. Cached per LocalService object: unchanged services keep theirs. */
export interface EncodedService {
  readonly service: WireValue;
  /** By endpoint path "ns/svc/<ip>". */
  readonly endpoints: ReadonlyMap<string, WireValue>;
}

const cache = new WeakMap<LocalService, EncodedService>();

export function encodedService(svc: LocalService): EncodedService {
  let encoded = cache.get(svc);
  if (encoded === undefined) {
    const wire = encodeLocalService(svc);
    const key = `${svc.namespace}/${svc.name}`;
    const endpoints = new Map<string, WireValue>();
    for (const [ip, ep] of wire.endpoints) {
      const path = `${key}/${ip}`;
      endpoints.set(path, wireValue(WireSet.EndpointsSet, path, encodeEndpointBytes(ep)));
    }
    encoded = {
      service: wireValue(WireSet.ServicesSet, key, encodeServiceBytes(wire.service)),
      endpoints,
    };
    cache.set(svc, encoded);
  }
  return encoded;
}

/** What changed between two states, service by service. */
export interface LocalDelta {
  /** Keys of services that may differ; others are known to be identical. */
  readonly keys: Iterable<string>;
  before(key: string): LocalService | undefined;
  after(key: string): LocalService | undefined;
}

/** Between two whole states: every key of either, compared by identity. */
export function fullDelta(
  before: ReadonlyMap<string, LocalService>,
  after: ReadonlyMap<string, LocalService>,
): LocalDelta {
  const keys = new Set<string>();
  for (const [k, v] of after) if (before.get(k) !== v) keys.add(k);
  for (const k of before.keys()) if (!after.has(k)) keys.add(k);
  return { keys, before: (k) => before.get(k), after: (k) => after.get(k) };
}

type PathFrame = readonly [path: string, frame: Frame];

const ascending = (a: PathFrame, b: PathFrame) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
const descending = (a: PathFrame, b: PathFrame) => -ascending(a, b);

/** The Set/Delete ops of one change set (without Reset or Sync). */
export function localChangeFrames(delta: LocalDelta): Frame[] {
  const serviceSets: PathFrame[] = [];
  const serviceDeletes: PathFrame[] = [];
  const endpointSets: PathFrame[] = [];
  const endpointDeletes: PathFrame[] = [];
  for (const key of delta.keys) {
    const old = delta.before(key);
    const cur = delta.after(key);
    if (old === cur) continue;
    const oldWire = old === undefined ? undefined : encodedService(old);
    const curWire = cur === undefined ? undefined : encodedService(cur);
    if (curWire === undefined) {
      if (oldWire !== undefined) serviceDeletes.push([key, deleteFrame(WireSet.ServicesSet, key)]);
    } else if (oldWire === undefined || !sameBytes(oldWire.service.bytes, curWire.service.bytes)) {
      serviceSets.push([key, curWire.service.frame]);
    }
    for (const path of oldWire?.endpoints.keys() ?? []) {
      if (!curWire?.endpoints.has(path))
        endpointDeletes.push([path, deleteFrame(WireSet.EndpointsSet, path)]);
    }
    for (const [path, value] of curWire?.endpoints ?? []) {
      const previous = oldWire?.endpoints.get(path);
      if (previous === undefined || !sameBytes(previous.bytes, value.bytes))
        endpointSets.push([path, value.frame]);
    }
  }
  serviceSets.sort(ascending);
  endpointDeletes.sort(descending);
  endpointSets.sort(ascending);
  serviceDeletes.sort(descending);
  return [...serviceSets, ...endpointDeletes, ...endpointSets, ...serviceDeletes].map(([, frame]) => frame);
}
