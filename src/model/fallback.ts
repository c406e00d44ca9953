// The names the Service fallback selector shares between its controller (which writes fallback
// EndpointSlices) and every proxy that reads them.

import type { EndpointSlice } from "./kube.ts";

/** Service annotation: label selector of the pods that serve when the Service's own have none ready. */
export const ANNOTATION_FALLBACK_SELECTOR = "fallback.kpng.io/selector";
/** Service annotation: how long the primary must stay ready before traffic returns to it. */
export const ANNOTATION_FALLBACK_RETURN_DELAY = "fallback.kpng.io/return-delay";
export const DEFAULT_FALLBACK_RETURN_DELAY = "10s";

export const LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by";
/** The managed-by value that marks an EndpointSlice as a fallback slice. */
export const FALLBACK_MANAGER = "fallback.kpng.io";
/** On fallback slices: "true" while the Service is served by its fallback pods, else "false". */
export const LABEL_FALLBACK_ACTIVE = "fallback.kpng.io/active";

export function isFallbackSlice(slice: EndpointSlice): boolean {
  return slice.metadata.labels[LABEL_MANAGED_BY] === FALLBACK_MANAGER;
}

export function isActiveFallbackSlice(slice: EndpointSlice): boolean {
  return isFallbackSlice(slice) && slice.metadata.labels[LABEL_FALLBACK_ACTIVE] === "true";
}

/** The primary (every slice but the fallback ones) has a ready endpoint; unset ready counts as ready. */
export function primaryHasReady(slices: Iterable<EndpointSlice>): boolean {
  return primaryHas(slices, (ready) => ready);
}

/** The primary has an endpoint a proxy may send to: ready, or else serving (and terminating). */
export function primaryHasServing(slices: Iterable<EndpointSlice>): boolean {
  return primaryHas(slices, (ready, serving) => ready || serving);
}

function primaryHas(
  slices: Iterable<EndpointSlice>,
  counts: (ready: boolean, serving: boolean) => boolean,
): boolean {
  for (const slice of slices) {
    if (isFallbackSlice(slice) || slice.addressType === "FQDN") continue;
    for (const e of slice.endpoints) {
      if (e.addresses.length === 0) continue;
      const ready = e.conditions.ready !== false;
      if (counts(ready, e.conditions.serving ?? ready)) return true;
    }
  }
  return false;
}
