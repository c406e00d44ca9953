// Bounds on what the API server (or anything posing as it) can make the reflector hold or wait
// for: a watch line that never ends, a list body without end, a list that trickles forever.
// Exceeding one aborts the request; the reflector logs it, counts it and retries with backoff.

/** A request stopped because a bound was reached; `reason` is the metric label. */
export class ReadLimitError extends Error {
  readonly reason: "too_large" | "deadline";
  constructor(reason: "too_large" | "deadline", message: string) {
    super(message);
    this.name = "ReadLimitError";
    this.reason = reason;
  }
}

/** Largest watch line (one event, one object): etcd stores objects up to 1.5 MiB by default. */
export const DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024;
/** Largest list page body (pages hold pageSize objects). */
export const DEFAULT_MAX_LIST_BYTES = 512 * 1024 * 1024;
/** Longest a single list page request may take, first byte to last. */
export const DEFAULT_LIST_TIMEOUT_MS = 60_000;
