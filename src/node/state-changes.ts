// How many services and endpoint sets changed between two local states, counted as kube-proxy
// counts them for its change metrics. Relies on the brain keeping the same object for a service
// whose computed value did not change.

import type { LocalService, LocalState } from "../model/local.ts";
import { serviceChanges } from "../model/local-changes.ts";

export interface StateChanges {
  /** Services added, removed, or whose own fields (IPs, ports, policies) changed. */
  readonly services: number;
  /** Services whose endpoints changed. */
  readonly endpoints: number;
}

function endpointsOf(s: LocalService): string {
  return s.ports
    .map(
      (p) =>
        `${p.name}|${p.internalEndpoints.map((e) => `${e.ip}:${e.port}:${+e.ready}${+e.serving}${+e.terminating}${+e.local}`)}|${p.externalEndpoints.map((e) => `${e.ip}:${e.port}`)}`,
    )
    .join(";");
}

function withoutEndpoints(s: LocalService): string {
  return JSON.stringify({
    ...s,
    localReadyEndpoints: 0,
    endpointsChangedAt: 0,
    ports: s.ports.map((p) => ({
      ...p,
      internalEndpoints: [],
      externalEndpoints: [],
      internalIPv4Count: 0,
      externalIPv4Count: 0,
      hasEndpoints: false,
      endpointFamilies: [],
    })),
  });
}

/** Whether any port of the service has an endpoint. */
export const hasEndpoints = (s: LocalService): boolean =>
  s.ports.some((p) => p.internalEndpoints.length + p.externalEndpoints.length > 0);

/** `keep` limits the count to some services (one IP family's), as they were before and after. */
export function stateChanges(
  before: LocalState | undefined,
  after: LocalState,
  keep: (s: LocalService) => boolean = () => true,
): StateChanges {
  let services = 0;
  let endpoints = 0;
  if (before === undefined) {
    // Everything is added: one pass over the values (100k at a cold start), no change tuples.
    for (const s of after.services.values()) {
      if (!keep(s)) continue;
      services++;
      if (hasEndpoints(s)) endpoints++;
    }
    return { services, endpoints };
  }
  for (const [, was, is] of serviceChanges(before, after)) {
    const b = was !== undefined && keep(was) ? was : undefined;
    const s = is !== undefined && keep(is) ? is : undefined;
    if (b === undefined && s === undefined) continue;
    const either = (s ?? b)!;
    if (b === undefined || s === undefined) {
      services++;
      if (hasEndpoints(either)) endpoints++;
      continue;
    }
    if (withoutEndpoints(b) !== withoutEndpoints(s)) services++;
    if (endpointsOf(b) !== endpointsOf(s)) endpoints++;
  }
  return { services, endpoints };
}
