// Conntrack cleanup after each successful sync. The stale filters of a sync are computed at once
// (cheap, pure), then run in the background so a slow conntrack never holds up the next sync:
// conntrack walks the whole table for each filter, about a second per filter at 100k entries
// on a busy node (bench/conntrack-cleanup.ts). Filters are idempotent, so running them a little
// later is safe; pending ones are merged, and each batch is one conntrack process with a
// deadline. Errors are logged and counted, never thrown: a failed cleanup only leaves stale UDP
// flows, which their timeout ends.

import { IP_FAMILIES } from "../../model/ip.ts";
import type { LocalState } from "../../model/local.ts";
import type { Logger } from "../../observability/log.ts";
import { counter, gauge, histogram } from "../../observability/metrics.ts";
import { type CtEntry, isTranslated, parseEntry, staleEntries } from "./reconcile.ts";
import type { ConntrackRunner } from "./runner.ts";
import { type CtFilter, filterLine, staleFilters } from "./stale.ts";

const duration = histogram(
  "kubeproxy_conntrack_reconciler_sync_duration_seconds",
  "Time spent removing stale UDP/SCTP conntrack entries (one batch).",
  [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  ["ip_family"],
);

const deleted = counter(
  "kubeproxy_conntrack_reconciler_deleted_entries_total",
  "Stale UDP/SCTP conntrack entries removed.",
  ["ip_family"],
);

const failures = counter(
  "kpng_conntrack_cleanup_failures_total",
  "conntrack batches that failed or timed out (logged; the proxy goes on).",
);

const pendingGauge = gauge(
  "kpng_conntrack_cleanup_pending_filters",
  "Stale-entry filters waiting for the conntrack batch in progress to finish.",
);

const dropped = counter(
  "kpng_conntrack_cleanup_dropped_filters_total",
  "Filters dropped because too many were pending (their entries end by timeout).",
);

/** Bound on pending filters: beyond it conntrack is far behind, and entries time out anyway. */
const MAX_PENDING = 50_000;
/** Service flows of the table judged per walk of the services at the first sync. */
const RECONCILE_CHUNK = 50_000;
/** Filters per conntrack process: each is a table walk, so a batch stays within its deadline. */
const MAX_BATCH = 200;

export class ConntrackCleaner {
  readonly #runner: ConntrackRunner;
  readonly #log: Logger;
  #last: LocalState | undefined;
  readonly #pending = new Map<string, CtFilter>();
  #draining: Promise<void> | undefined;

  constructor(runner: ConntrackRunner, log: Logger) {
    this.#runner = runner;
    this.#log = log;
    for (const family of IP_FAMILIES) {
      duration.zero({ ip_family: family });
      deleted.inc({ ip_family: family }, 0);
    }
  }

  /**
   * Queues the removal of what `state` made stale since the last call and returns the number of
   * filters queued. The first state after start is reconciled with the table instead: only the
   * entries DNATed to what is no longer an endpoint of their Service go (flushing every UDP
   * Service's entries on each restart would break live flows).
   */
  cleanup(state: LocalState): number {
    const before = this.#last;
    this.#last = state;
    if (before === undefined) {
      this.#draining = (this.#draining ?? Promise.resolve())
        .then(() => this.#reconcile(state))
        .then(() => this.#drain())
        .finally(() => this.#drained());
      return 0;
    }
    return this.#queue(staleFilters(before, state));
  }

  /** Lists the UDP and SCTP entries and queues a filter for each stale one. */
  async #reconcile(state: LocalState): Promise<void> {
    const filters: CtFilter[] = [];
    // Judged a chunk at a time: each chunk is one walk of the services, and memory stays bounded.
    let chunk: CtEntry[] = [];
    const judge = () => {
      for (const f of staleEntries(state, chunk)) if (filters.length < MAX_PENDING) filters.push(f);
      chunk = [];
    };
    for (const protocol of ["udp", "sctp"] as const) {
      try {
        await this.#runner.list(protocol, (line) => {
          const entry = parseEntry(line);
          if (entry === undefined || !isTranslated(entry)) return;
          chunk.push(entry);
          if (chunk.length === RECONCILE_CHUNK) judge();
        });
      } catch (err) {
        failures.inc();
        this.#log.warn(
          { err: String(err), protocol },
          "cannot list conntrack entries; stale ones end by timeout",
        );
      }
    }
    judge();
    if (filters.length > 0)
      this.#log.info(
        { filters: filters.length },
        "removing conntrack entries left stale while kpng was down",
      );
    this.#queue(filters);
  }

  #queue(filters: readonly CtFilter[]): number {
    for (const f of filters) {
      if (this.#pending.size >= MAX_PENDING) {
        dropped.inc();
        continue;
      }
      this.#pending.set(filterLine(f), f);
    }
    pendingGauge.set(this.#pending.size);
    this.#kick();
    return filters.length;
  }

  /** Starts draining what is pending, unless a drain is running (it takes what is added meanwhile). */
  #kick(): void {
    if (this.#draining !== undefined || this.#pending.size === 0) return;
    this.#draining = this.#drain().finally(() => this.#drained());
  }

  /** A drain ended: filters queued after its last look at the queue start the next one. */
  #drained(): void {
    this.#draining = undefined;
    this.#kick();
  }

  /** Resolves when nothing is pending (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.#draining) await this.#draining;
  }

  async #drain(): Promise<void> {
    while (this.#pending.size > 0) {
      // One family per batch, so that each family's time and deletions are its own (kube-proxy
      // reconciles per family).
      const family = this.#pending.values().next().value?.family ?? "IPv4";
      const lines: string[] = [];
      for (const [line, f] of this.#pending) {
        if (f.family !== family) continue;
        lines.push(line);
        if (lines.length === MAX_BATCH) break;
      }
      for (const l of lines) this.#pending.delete(l);
      pendingGauge.set(this.#pending.size);
      const started = performance.now();
      this.#log.trace({ filters: lines.length }, "conntrack batch started");
      try {
        const n = await this.#runner.deleteBatch(lines);
        deleted.inc({ ip_family: family }, n);
        if (n > 0) this.#log.debug({ filters: lines.length, deleted: n }, "removed stale conntrack entries");
      } catch (err) {
        failures.inc();
        this.#log.warn({ err: String(err), filters: lines.length }, "conntrack cleanup failed");
      } finally {
        duration.observe({ ip_family: family }, (performance.now() - started) / 1000);
        this.#log.trace("conntrack batch done");
      }
    }
  }
}
