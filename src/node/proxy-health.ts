// Whether the proxy keeps up with changes, as kube-proxy's /healthz and /livez report it: a
// family is unhealthy when a change has waited longer than the health timeout for a sync.
// Fed by the backend's sync loop through SyncObserver (sync-observer.ts); the clock is injected.

import type { IPFamily } from "../model/kube.ts";

interface FamilyHealth {
  /** Last successful sync (ms since epoch), or undefined before the first. */
  readonly lastUpdated: number | undefined;
  /** Oldest change still waiting for a sync, or undefined when none waits. */
  readonly oldestQueued: number | undefined;
}

export interface HealthSnapshot {
  readonly healthy: boolean;
  readonly nodeEligible: boolean;
  readonly lastUpdated: number | undefined;
  readonly now: number;
  readonly families: ReadonlyMap<
    IPFamily,
    { readonly lastUpdated: number | undefined; readonly healthy: boolean }
  >;
}

export class ProxyHealth {
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #families = new Map<IPFamily, FamilyHealth>();
  #nodeEligible = false;

  constructor(options: { families: readonly IPFamily[]; timeoutMs: number; now?: () => number }) {
    this.#timeoutMs = options.timeoutMs;
    this.#now = options.now ?? Date.now;
    for (const f of options.families)
      this.#families.set(f, { lastUpdated: undefined, oldestQueued: undefined });
  }

  /** A change waits for a sync: keeps the time of the oldest waiting one. */
  queued(): void {
    const now = this.#now();
    for (const [f, h] of this.#families) {
      if (h.oldestQueued === undefined) this.#families.set(f, { ...h, oldestQueued: now });
    }
  }

  /** A sync succeeded: nothing waits any more. */
  updated(): void {
    const now = this.#now();
    for (const f of this.#families.keys())
      this.#families.set(f, { lastUpdated: now, oldestQueued: undefined });
  }

  /** From the Node object: known, not being deleted, not tainted for deletion by the autoscaler. */
  setNodeEligible(eligible: boolean): void {
    this.#nodeEligible = eligible;
  }

  snapshot(): HealthSnapshot {
    const now = this.#now();
    const families = new Map<IPFamily, { lastUpdated: number | undefined; healthy: boolean }>();
    let healthy = true;
    let lastUpdated: number | undefined;
    for (const [f, h] of this.#families) {
      const ok = familyHealthy(h, now, this.#timeoutMs);
      healthy &&= ok;
      families.set(f, { lastUpdated: h.lastUpdated, healthy: ok });
      if (h.lastUpdated !== undefined && (lastUpdated === undefined || h.lastUpdated > lastUpdated)) {
        lastUpdated = h.lastUpdated;
      }
    }
    return { healthy, nodeEligible: this.#nodeEligible, lastUpdated, now, families };
  }
}

/** Unhealthy iff a change has waited for at least the timeout. */
function familyHealthy(h: FamilyHealth, now: number, timeoutMs: number): boolean {
  return h.oldestQueued === undefined || now - h.oldestQueued < timeoutMs;
}
