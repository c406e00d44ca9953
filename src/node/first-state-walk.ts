// What the sync metrics need of a first state (every Service, all of a large cluster at a cold
// start), found in one walk for every IP family and shared by every backend's series: to-ebpf and
// its nft companion each keep a series per family, and each would otherwise walk every Service.

import type { IPFamily } from "../model/kube.ts";
import type { LocalEndpoint, LocalService, LocalState } from "../model/local.ts";
import { hasEndpoints, type StateChanges } from "./state-changes.ts";

/** A family's series, or "" for a write that programs both families at once. */
export type FamilyScope = IPFamily | "";

const SCOPES: readonly FamilyScope[] = ["", "IPv4", "IPv6"];

/** Whether a family's rules hold the service: one of its cluster IPs is of the family (as kube-proxy's per-family proxiers). */
export function inFamily(s: LocalService, family: FamilyScope): boolean {
  return family === "" || s.families.length === 0 || s.families.some((f) => f.family === family);
}

const noLocal = (lists: readonly (readonly LocalEndpoint[])[]): boolean =>
  lists.every((l) => !l.some((e) => e.local));

/** internalTrafficPolicy Local, and no endpoint on this node. */
export const lacksLocalInternal = (s: LocalService): boolean =>
  s.internalTrafficPolicy === "Local" && noLocal(s.ports.map((p) => p.internalEndpoints));

/** externalTrafficPolicy Local on a service reachable from outside, and no endpoint on this node. */
export const lacksLocalExternal = (s: LocalService): boolean =>
  s.externalTrafficPolicy === "Local" &&
  s.ports.some((p) => p.nodePort > 0 || s.type === "LoadBalancer") &&
  noLocal(s.ports.map((p) => p.externalEndpoints));

/** One family's share of a first state. */
interface FirstStateShare {
  /** Every service is added: how many, and how many of them have endpoints. */
  readonly changes: StateChanges;
  /** The keys of the services that lack a local endpoint, by traffic policy. */
  readonly noLocalInternal: readonly string[];
  readonly noLocalExternal: readonly string[];
  /** The endpointsChangedAt of each service that has one (network programming latency). */
  readonly endpointsChangedAt: readonly number[];
}

const walked = new WeakMap<LocalState, ReadonlyMap<FamilyScope, FirstStateShare>>();

/** `family`'s share of `state` taken as a first state; the walk is made once per state. */
export function firstStateShare(state: LocalState, family: FamilyScope): FirstStateShare {
  let shares = walked.get(state);
  if (shares === undefined) {
    shares = walk(state);
    walked.set(state, shares);
  }
  return shares.get(family) as FirstStateShare;
}

function walk(state: LocalState): ReadonlyMap<FamilyScope, FirstStateShare> {
  const shares = SCOPES.map((family) => ({
    family,
    changes: { services: 0, endpoints: 0 },
    noLocalInternal: [] as string[],
    noLocalExternal: [] as string[],
    endpointsChangedAt: [] as number[],
  }));
  for (const [key, s] of state.services) {
    const withEndpoints = hasEndpoints(s);
    const internal = lacksLocalInternal(s);
    const external = lacksLocalExternal(s);
    const t = s.endpointsChangedAt;
    for (const share of shares) {
      if (!inFamily(s, share.family)) continue;
      share.changes.services++;
      if (withEndpoints) share.changes.endpoints++;
      if (internal) share.noLocalInternal.push(key);
      if (external) share.noLocalExternal.push(key);
      if (t !== undefined) share.endpointsChangedAt.push(t);
    }
  }
  return new Map(shares.map((s) => [s.family, s]));
}
