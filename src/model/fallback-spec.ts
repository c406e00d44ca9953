// A Service's fallback annotations → what the controller and the proxies do for it.

import { parseDuration } from "./duration.ts";
import {
  ANNOTATION_FALLBACK_RETURN_DELAY,
  ANNOTATION_FALLBACK_SELECTOR,
  DEFAULT_FALLBACK_RETURN_DELAY,
} from "./fallback.ts";
import type { Labels } from "./kube.ts";
import { type LabelSelector, parseLabelSelector } from "./label-selector.ts";

export type FallbackSpec =
  | { readonly kind: "none" }
  | { readonly kind: "invalid"; readonly reason: string }
  | { readonly kind: "valid"; readonly selector: LabelSelector; readonly returnDelayMs: number };

/** A day: longer delays are surely typos, and timers must stay within their range. */
const MAX_RETURN_DELAY_MS = 86_400_000;

/**
 * - no selector annotation: none (a return delay alone does nothing);
 * - an empty selector would select every pod of the namespace: invalid, never a fallback;
 * - an unparsable selector or return delay: invalid, with the reason for the Warning event.
 */
export function readFallbackSpec(annotations: Labels): FallbackSpec {
  const text = annotations[ANNOTATION_FALLBACK_SELECTOR];
  if (text === undefined) return { kind: "none" };
  if (text.trim() === "") {
    return {
      kind: "invalid",
      reason: `${ANNOTATION_FALLBACK_SELECTOR} is empty (it would select every pod)`,
    };
  }
  let selector: LabelSelector;
  try {
    selector = parseLabelSelector(text);
  } catch (err) {
    return { kind: "invalid", reason: `${ANNOTATION_FALLBACK_SELECTOR}: ${(err as Error).message}` };
  }
  const delayText = annotations[ANNOTATION_FALLBACK_RETURN_DELAY] ?? DEFAULT_FALLBACK_RETURN_DELAY;
  let returnDelayMs: number;
  try {
    returnDelayMs = parseDuration(delayText);
  } catch (err) {
    return { kind: "invalid", reason: `${ANNOTATION_FALLBACK_RETURN_DELAY}: ${(err as Error).message}` };
  }
  if (returnDelayMs > MAX_RETURN_DELAY_MS) {
    return {
      kind: "invalid",
      reason: `${ANNOTATION_FALLBACK_RETURN_DELAY}: ${delayText} is longer than 24h`,
    };
  }
  return { kind: "valid", selector, returnDelayMs };
}
