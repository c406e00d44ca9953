// What a backend's sync loop tells the node services. Any backend calls these; it needs to know
// nothing about health, metrics, healthCheckNodePorts or conntrack.

import type { LocalState } from "../model/local.ts";

export interface SyncOutcome {
  /** The state now programmed. */
  readonly state: LocalState;
  /** True when the sync rewrote everything (start, after a failure, after a repair). */
  readonly full: boolean;
  readonly durationMs: number;
}

export interface SyncObserver {
  /** A new state arrived and waits for a sync. */
  queued(state: LocalState): void;
  /** A sync succeeded. The backend awaits it before its next sync (bounded by timeouts inside). */
  synced(outcome: SyncOutcome): Promise<void>;
  /** A sync failed; the backend retries. */
  failed(): void;
}

/** For backends run without node services (tests, dry runs). */
export const NO_OBSERVER: SyncObserver = {
  queued: () => {},
  synced: async () => {},
  failed: () => {},
};
