// The nft sync loop: keeps each family's table in line with the latest local state. States that
// arrive while a sync runs are coalesced (only the latest matters); the feed is already paced by
// --min-sync-period (pacedFeed), so a new state is synced at once; a failed sync is logged with its transaction, retried with backoff, and
// followed by a full resync from a fresh listing of the table (the mirror is no longer trusted).

import { Counter, Histogram } from "prom-client";
import type { LocalState, LocalStateFeed } from "../../model/local.ts";
import { NO_OBSERVER, type SyncObserver } from "../../node/sync-observer.ts";
import type { Logger } from "../../observability/log.ts";
import { registry } from "../../observability/metrics.ts";
import { parseListing } from "./adopt.ts";
import type { NftFamily, TableConfig } from "./fragment.ts";
import { STALE_DELETE_DELAY_MS, TableMirror } from "./mirror.ts";
import { renderScript } from "./ops.ts";
import { NftError, type NftRunner } from "./runner.ts";
import { packTransactions } from "./transaction.ts";

const syncDuration = new Histogram({
  name: "kpng_nft_sync_duration_seconds",
  help: "Time to bring the nft tables in line with a new local state.",
  buckets: [0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [registry],
});

const syncFailures = new Counter({
  name: "kpng_nft_sync_failures_total",
  help: "nft transactions that failed; each one triggers a retry and a full resync.",
  registers: [registry],
});

/**
 * Statements per transaction on a large sync (each element counts as one): bounded so no single
 * `nft -f` grows without limit. Every `nft -f` first dumps all chains of the table, so smaller
 * chunks cost more in total: 44k services took 14.6 s with 10k, 8.1 s with 25k, 6.6 s with 50k.
 */
export const DEFAULT_MAX_STATEMENTS = 25_000;

export interface NftBackendOptions {
  readonly runner: NftRunner;
  /** One table per family. */
  readonly tables: readonly TableConfig[];
  readonly log: Logger;
  readonly syncPeriodMs?: number;
  readonly maxStatementsPerTransaction?: number;
  readonly now?: () => number;
  /** Told of every queued state and sync outcome (health, metrics, conntrack, …). */
  readonly observer?: SyncObserver;
}

export interface SyncReport {
  /** Transactions run, stale-object deletions included. */
  readonly transactions: number;
  /** The texts run, in order. */
  readonly texts: readonly string[];
}

export class NftBackend {
  readonly #o: Required<Omit<NftBackendOptions, "now">>;
  /** Set while run() runs: marks the state dirty and wakes the loop. */
  #kick: (() => void) | undefined;
  readonly #now: () => number;
  readonly #mirrors = new Map<NftFamily, TableMirror>();

  constructor(options: NftBackendOptions) {
    this.#o = {
      syncPeriodMs: 30_000,
      maxStatementsPerTransaction: DEFAULT_MAX_STATEMENTS,
      observer: NO_OBSERVER,
      ...options,
    };
    this.#now = options.now ?? Date.now;
  }

  /** True when some table holds flushed chains or sets waiting for deletion. */
  get hasStale(): boolean {
    for (const m of this.#mirrors.values()) if (m.hasStale) return true;
    return false;
  }

  /** Whether the next sync of a family starts from a listing of the table (start, or after a failure). */
  needsFullSync(family: NftFamily): boolean {
    return !this.#mirrors.has(family);
  }

  /** Someone else changed kpng's tables: forget what they hold and rewrite them at once. */
  forceFullSync(): void {
    this.#mirrors.clear();
    this.#kick?.();
  }

  /**
   * One sync of every table to `state`. Throws on failure, after forgetting the failed table's
   * mirror so that the next sync re-reads the table and converges it.
   */
  async sync(state: LocalState): Promise<SyncReport> {
    const started = performance.now();
    const texts: string[] = [];
    for (const cfg of this.#o.tables) {
      let mirror = this.#mirrors.get(cfg.family);
      if (!mirror) {
        const listing = await this.#o.runner.listTable(cfg.family, cfg.table);
        mirror = new TableMirror(cfg, listing === undefined ? undefined : parseListing(listing));
        this.#mirrors.set(cfg.family, mirror);
      }
      const plan = mirror.plan(state, this.#now());
      const txs = packTransactions(plan.units, cfg.family, cfg.table, this.#o.maxStatementsPerTransaction);
      if (plan.deletions.length > 0) txs.unshift(renderScript(plan.deletions, cfg.family, cfg.table));
      for (const tx of txs) {
        try {
          await this.#o.runner.run(tx.text, tx.line);
          texts.push(tx.text);
        } catch (e) {
          this.#mirrors.delete(cfg.family);
          syncFailures.inc();
          const stderr = e instanceof NftError ? e.stderr : String(e);
          this.#o.log.error(
            { family: cfg.family, table: cfg.table, stderr, transaction: tx.text },
            "nft transaction failed; will retry with a full resync",
          );
          throw e;
        }
      }
    }
    syncDuration.observe((performance.now() - started) / 1000);
    // Not awaited: the next transaction queues behind it anyway.
    void this.#o.runner.prepare?.();
    return { transactions: texts.length, texts };
  }

  /** Runs until `signal` aborts, syncing each new state of `feed`. */
  async run(feed: LocalStateFeed, signal: AbortSignal): Promise<void> {
    let latest: LocalState | undefined;
    let dirty = false;
    let wake: (() => void) | undefined;
    const observer = this.#o.observer;
    const unsubscribe = feed.subscribe((s) => {
      latest = s;
      dirty = true;
      observer.queued(s);
      wake?.();
    });
    this.#kick = () => {
      dirty = true;
      wake?.();
    };
    const onAbort = () => wake?.();
    signal.addEventListener("abort", onAbort);
    let lastStart = Number.NEGATIVE_INFINITY;
    let failures = 0;
    let retryAt = 0;
    try {
      while (!signal.aborted) {
        const now = this.#now();
        let due = Number.POSITIVE_INFINITY;
        if (latest !== undefined) {
          if (failures > 0) due = retryAt;
          else if (dirty) due = now;
          else if (this.hasStale) due = lastStart + STALE_DELETE_DELAY_MS;
          else due = lastStart + this.#o.syncPeriodMs;
        }
        if (due > now || latest === undefined) {
          await new Promise<void>((resolve) => {
            const timer = Number.isFinite(due) ? setTimeout(resolve, due - now) : undefined;
            wake = () => {
              if (timer) clearTimeout(timer);
              resolve();
            };
          });
          wake = undefined;
          continue;
        }
        lastStart = now;
        dirty = false;
        const state = latest;
        const full = this.#o.tables.some((t) => this.needsFullSync(t.family));
        const started = performance.now();
        try {
          const report = await this.sync(state);
          if (report.transactions > 0) {
            this.#o.log.debug({ revision: latest.revision, transactions: report.transactions }, "nft synced");
          }
          if (failures > 0) this.#o.log.info({ revision: latest.revision }, "nft resynced after failure");
          failures = 0;
          // The observer's own errors are not sync failures.
          await observer
            .synced({ state, full, durationMs: performance.now() - started })
            .catch((err: unknown) => this.#o.log.error({ err }, "node services failed after a sync"));
        } catch {
          observer.failed();
          failures++;
          const backoff = Math.min(1000 * 2 ** (failures - 1), Math.max(this.#o.syncPeriodMs, 1000));
          retryAt = this.#now() + backoff;
        }
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      this.#kick = undefined;
      unsubscribe();
    }
  }
}
