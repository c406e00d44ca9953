// When a Service is served by its fallback pods. Switching to the fallback is immediate; the
// return waits until the primary has kept a ready endpoint for the whole return delay, so a
// primary that flaps keeps the fallback active instead of switching back and forth.

export interface ActivationState {
  readonly active: boolean;
  /** While active: since when the primary has had a ready endpoint without a break. */
  readonly primaryReadySince: number | undefined;
}

interface Observation {
  readonly primaryReady: boolean;
  /**
   * The primary still has an endpoint that serves: ready, or terminating and still serving. A
   * stock proxy uses terminating endpoints when none is ready; activating then would make it mix
   * them with the fallback's, so the switch waits until they are gone. Unset: primaryReady.
   */
  readonly primaryServing?: boolean;
  readonly fallbackReady: boolean;
  readonly now: number;
  readonly returnDelayMs: number;
}

interface Step {
  readonly state: ActivationState;
  readonly switched: "activated" | "deactivated" | undefined;
  /** Observe again at this time even if nothing changes: the return delay will have run out. */
  readonly recheckAt: number | undefined;
}

export const INACTIVE: ActivationState = { active: false, primaryReadySince: undefined };

/**
 * - inactive → active as soon as the primary has no serving endpoint (ready, or terminating and
 *   still serving) and the fallback has a ready one;
 * - active → inactive once the primary has been ready for returnDelayMs;
 * - active → inactive at once when neither has a ready endpoint (nothing to fall back to);
 * - a primary that loses its ready endpoints while active restarts the delay.
 */
export function step(state: ActivationState, o: Observation): Step {
  if (!state.active) {
    if (!(o.primaryServing ?? o.primaryReady) && o.fallbackReady) {
      return {
        state: { active: true, primaryReadySince: undefined },
        switched: "activated",
        recheckAt: undefined,
      };
    }
    return { state: INACTIVE, switched: undefined, recheckAt: undefined };
  }
  if (!o.primaryReady) {
    if (!o.fallbackReady) return { state: INACTIVE, switched: "deactivated", recheckAt: undefined };
    return {
      state: { active: true, primaryReadySince: undefined },
      switched: undefined,
      recheckAt: undefined,
    };
  }
  const since = state.primaryReadySince ?? o.now;
  const returnAt = since + o.returnDelayMs;
  if (o.now >= returnAt) return { state: INACTIVE, switched: "deactivated", recheckAt: undefined };
  return { state: { active: true, primaryReadySince: since }, switched: undefined, recheckAt: returnAt };
}
