// Which of a Service's EndpointSlices serve it: its own, or its fallback ones, never both.
//
// Two steps. slicesInEffect (pure, per computation) follows the controller's `active` label.
// FallbackReturns (in the store, with a clock) keeps the return delay on the proxy's own
// observation, so a dead or removed controller can never hold traffic on the fallback: once the
// primary has had a ready endpoint for the return delay, the fallback slices are dropped here
// whatever their label says; and an annotation that is gone or invalid drops them at once.

import type { Clock } from "../model/clock.ts";
import {
  isActiveFallbackSlice as isActiveFallback,
  isFallbackSlice,
  primaryHasReady,
} from "../model/fallback.ts";
import { readFallbackSpec } from "../model/fallback-spec.ts";
import type { EndpointSlice, Service } from "../model/kube.ts";
import { withConditions } from "../model/slice-endpoint.ts";

const asServing = new WeakMap<EndpointSlice, EndpointSlice>();

/**
 * An active fallback publishes its pods as serving-but-terminating (so a stock proxy uses them
 * only while the Service has no ready endpoint at all). Here the fallback replaces the primary,
 * so serving is what counts: a serving endpoint is ready, one that is not serving is not.
 */
function servingAsReady(slice: EndpointSlice): EndpointSlice {
  let out = asServing.get(slice);
  if (out === undefined) {
    out = {
      ...slice,
      endpoints: slice.endpoints.map((ep) => {
        const serving = ep.conditions.serving ?? ep.conditions.ready ?? true;
        return withConditions(ep, { ready: serving, serving, terminating: !serving });
      }),
    };
    asServing.set(slice, out);
  }
  return out;
}

/**
 * - When any fallback slice says active, only the fallback slices that say active serve: while
 *   the controller rewrites several slices, one still marked inactive is left out rather than
 *   mixed with the primary. Their serving endpoints count as ready.
 * - Otherwise every fallback slice is ignored and the others serve as usual.
 * Returns the input list itself when it holds no fallback slice (the common case allocates nothing).
 */
export function slicesInEffect(slices: readonly EndpointSlice[]): readonly EndpointSlice[] {
  if (!slices.some(isFallbackSlice)) return slices;
  if (slices.some(isActiveFallback)) return slices.filter(isActiveFallback).map(servingAsReady);
  return slices.filter((slice) => !isFallbackSlice(slice));
}

/**
 * The return delay as this proxy sees it. For each Service with an active fallback it remembers
 * since when the primary has had a ready endpoint (restarting when it loses them), and once that
 * lasted the Service's return delay it hands out the slices without the fallback ones, and
 * calls `expired` at that moment so the owner recomputes the Service.
 */
export class FallbackReturns {
  readonly #clock: Clock;
  readonly #expired: (serviceKey: string) => void;
  /** service key → since when its primary has been ready while its fallback is active. */
  readonly #readySince = new Map<string, number>();
  readonly #timers = new Map<string, () => void>();

  constructor(clock: Clock, expired: (serviceKey: string) => void) {
    this.#clock = clock;
    this.#expired = expired;
  }

  /** How many Services are waiting out a return delay (tests, metrics). */
  get waiting(): number {
    return this.#timers.size;
  }

  /**
   * - no fallback slice: the list itself;
   * - the Service gone, its selector annotation gone or invalid: the fallback slices dropped;
   * - no active fallback slice, or a primary without a ready endpoint: the list itself;
   * - a ready primary and an active fallback: the list until the primary has been ready for the
   *   return delay, then the list without the fallback slices.
   */
  filter(
    key: string,
    service: Service | undefined,
    slices: readonly EndpointSlice[],
  ): readonly EndpointSlice[] {
    if (!slices.some(isFallbackSlice)) return this.#forget(key, slices);
    const spec = service === undefined ? undefined : readFallbackSpec(service.metadata.annotations);
    if (spec?.kind !== "valid") return this.#forget(key, withoutFallback(slices));
    if (!slices.some(isActiveFallback) || !primaryHasReady(slices)) return this.#forget(key, slices);
    const now = this.#clock.now();
    const since = this.#readySince.get(key) ?? now;
    this.#readySince.set(key, since);
    const returnAt = since + spec.returnDelayMs;
    if (now >= returnAt) {
      this.#cancel(key);
      return withoutFallback(slices);
    }
    this.#cancel(key);
    this.#timers.set(
      key,
      this.#clock.after(returnAt - now, () => {
        this.#timers.delete(key);
        this.#expired(key);
      }),
    );
    return slices;
  }

  /** Stops every timer (the store is done). */
  close(): void {
    for (const cancel of this.#timers.values()) cancel();
    this.#timers.clear();
  }

  #forget(key: string, slices: readonly EndpointSlice[]): readonly EndpointSlice[] {
    this.#readySince.delete(key);
    this.#cancel(key);
    return slices;
  }

  #cancel(key: string): void {
    this.#timers.get(key)?.();
    this.#timers.delete(key);
  }
}

function withoutFallback(slices: readonly EndpointSlice[]): readonly EndpointSlice[] {
  return slices.filter((slice) => !isFallbackSlice(slice));
}
