// Which of a Service's EndpointSlices serve it: its own, or its fallback ones, never both.

import { FALLBACK_MANAGER, LABEL_FALLBACK_ACTIVE, LABEL_MANAGED_BY } from "../model/fallback.ts";
import type { EndpointSlice } from "../model/kube.ts";

function isFallbackSlice(slice: EndpointSlice): boolean {
  return slice.metadata.labels[LABEL_MANAGED_BY] === FALLBACK_MANAGER;
}

function isActiveFallback(slice: EndpointSlice): boolean {
  return isFallbackSlice(slice) && slice.metadata.labels[LABEL_FALLBACK_ACTIVE] === "true";
}

/**
 * - When any fallback slice says active, only the fallback slices that say active serve: while
 *   the controller rewrites several slices, one still marked inactive is left out rather than
 *   mixed with the primary.
 * - Otherwise every fallback slice is ignored and the others serve as usual.
 * Returns the input list itself when it holds no fallback slice (the common case allocates nothing).
 */
export function slicesInEffect(slices: readonly EndpointSlice[]): readonly EndpointSlice[] {
  if (!slices.some(isFallbackSlice)) return slices;
  if (slices.some(isActiveFallback)) return slices.filter(isActiveFallback);
  return slices.filter((slice) => !isFallbackSlice(slice));
}
