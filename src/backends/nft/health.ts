// What the nft backend tells about itself: whether each table has been programmed and whether
// its last sync failed. The node's /healthz reads this through BackendHealth; the backend also
// counts and logs every failure.

import type { NftFamily } from "../../model/ip.ts";

export interface FamilyHealth {
  readonly family: NftFamily;
  /** The table has been brought in line with a state at least once. */
  readonly programmed: boolean;
  /** Consecutive failed syncs of this table; 0 when the last one succeeded. */
  readonly failures: number;
  readonly lastError?: string;
  /** When (ms since the epoch) the table was last in line with a state. */
  readonly lastSuccessAt?: number;
}

export interface BackendHealth {
  /** Every table programmed, and no table's last sync failed. */
  readonly healthy: boolean;
  readonly families: readonly FamilyHealth[];
}

export function summarize(families: readonly FamilyHealth[]): BackendHealth {
  return { healthy: families.every((f) => f.programmed && f.failures === 0), families };
}

/** The retry delay after `failures` consecutive failures: 1 s doubling, at most `maxMs`. */
export function retryDelayMs(failures: number, maxMs: number): number {
  return Math.min(1000 * 2 ** Math.max(0, failures - 1), Math.max(maxMs, 1000));
}
