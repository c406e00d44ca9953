// Runs conntrack cleanup after each successful sync: the stale entries between the last cleaned
// state and the one just programmed. Errors are logged and counted, never thrown: a failed
// cleanup only leaves stale UDP flows, which the next change or their timeout ends.

import { Counter, Histogram } from "prom-client";
import type { LocalState } from "../../model/local.ts";
import type { Logger } from "../../observability/log.ts";
import { registry } from "../../observability/metrics.ts";
import type { ConntrackRunner } from "./runner.ts";
import { filterLine, staleFilters } from "./stale.ts";

const duration = new Histogram({
  name: "kubeproxy_conntrack_reconciler_sync_duration_seconds",
  help: "Time spent removing stale UDP/SCTP conntrack entries after a sync.",
  buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});

const deleted = new Counter({
  name: "kubeproxy_conntrack_reconciler_deleted_entries_total",
  help: "Stale UDP/SCTP conntrack entries removed.",
  registers: [registry],
});

const failures = new Counter({
  name: "kpng_conntrack_cleanup_failures_total",
  help: "conntrack cleanups that failed or timed out (logged; the proxy goes on).",
  registers: [registry],
});

export class ConntrackCleaner {
  readonly #runner: ConntrackRunner;
  readonly #log: Logger;
  #last: LocalState | undefined;

  constructor(runner: ConntrackRunner, log: Logger) {
    this.#runner = runner;
    this.#log = log;
  }

  /**
   * Removes what `state` made stale since the last call. The first state after start only sets
   * the baseline: flushing every UDP service's entries on each restart would break live flows.
   */
  async cleanup(state: LocalState): Promise<number> {
    const before = this.#last;
    this.#last = state;
    if (before === undefined) return 0;
    const filters = staleFilters(before, state);
    if (filters.length === 0) return 0;
    const started = performance.now();
    try {
      const n = await this.#runner.deleteBatch(filters.map(filterLine));
      deleted.inc(n);
      if (n > 0) this.#log.debug({ filters: filters.length, deleted: n }, "removed stale conntrack entries");
      return n;
    } catch (err) {
      failures.inc();
      this.#log.warn({ err: String(err), filters: filters.length }, "conntrack cleanup failed");
      return 0;
    } finally {
      duration.observe((performance.now() - started) / 1000);
    }
  }
}
