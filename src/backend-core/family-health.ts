// What a backend tells about each of its IP families: whether its rules have been programmed and
// whether its last sync failed. /healthz and the tests read it; the sync loop also counts and
// logs every failure.

export interface BackendFamilyHealth {
  /** The backend's name of the family ("ip"/"ip6" for nft, "IPv4"/"IPv6" for iptables). */
  readonly family: string;
  /** The family's rules have been brought in line with a state at least once. */
  readonly programmed: boolean;
  /** Consecutive failed syncs of this family; 0 when the last one succeeded. */
  readonly failures: number;
  readonly lastError?: string;
  /** When (ms since the epoch) the family was last in line with a state. */
  readonly lastSuccessAt?: number;
}

export interface BackendHealth {
  /** Every family programmed, and no family's last sync failed. */
  readonly healthy: boolean;
  readonly families: readonly BackendFamilyHealth[];
}

export function summarize(families: readonly BackendFamilyHealth[]): BackendHealth {
  return { healthy: families.every((f) => f.programmed && f.failures === 0), families };
}
