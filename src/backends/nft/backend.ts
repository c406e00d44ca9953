// The nft sync loop: keeps each family's table in line with the latest local state. States that
// arrive while a sync runs are coalesced (only the latest matters); the feed is already paced by
// --min-sync-period (pacedFeed), so a new state is synced at once. Families are synced independently: a failed table is logged (the failing
// statement, not the whole transaction, and a recurring failure at a decaying rate), counted,
// retried with backoff and resynced from a fresh listing (its mirror is no longer trusted), while
// the other family keeps following every change. Shutdown never waits for a hung nft.

import { Counter, Gauge, Histogram } from "prom-client";
import type { NftFamily } from "../../model/ip.ts";
import type { LocalState, LocalStateFeed } from "../../model/local.ts";
import { NO_OBSERVER, type SyncObserver } from "../../node/sync-observer.ts";
import type { Logger } from "../../observability/log.ts";
import { registry } from "../../observability/metrics.ts";
import { RepeatLimiter } from "../../observability/repeat-limiter.ts";
import { ABORTED, unlessAborted } from "./abort.ts";
import { parseListing } from "./adopt.ts";
import { excerptTransaction, type TransactionExcerpt } from "./failure-excerpt.ts";
import type { TableConfig } from "./fragment.ts";
import { type BackendHealth, type FamilyHealth, retryDelayMs, summarize } from "./health.ts";
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

const listingFailures = new Counter({
  name: "kpng_nft_table_read_failures_total",
  help: "Failed reads of a table (nft -j list) before a full resync, by family; the sync is retried.",
  labelNames: ["family"] as const,
  registers: [registry],
});

const programmedGauge = new Gauge({
  name: "kpng_nft_table_healthy",
  help: "1 when the family's table is programmed and its last sync succeeded, else 0.",
  labelNames: ["family"] as const,
  registers: [registry],
});

/** Why a table's sync failed: reading it, or applying a transaction. */
class TableSyncError extends Error {
  readonly family: NftFamily;
  /** nft's error output, when nft ran. */
  readonly stderr: string | undefined;
  /** What the log shows of the failed transaction, when one failed. */
  readonly transaction: TransactionExcerpt | undefined;
  constructor(
    family: NftFamily,
    message: string,
    options: { cause: unknown; stderr?: string; transaction?: TransactionExcerpt },
  ) {
    super(message, { cause: options.cause });
    this.name = "TableSyncError";
    this.family = family;
    this.stderr = options.stderr;
    this.transaction = options.transaction;
  }
}

/**
 * Statements per transaction on a large sync (each element counts as one): bounded so no single
 * `nft -f` grows without limit. Every `nft -f` first dumps all chains of the table, so smaller
 * chunks cost more in total: 44k services took 14.6 s with 10k, 8.1 s with 25k, 6.6 s with 50k.
 */
const DEFAULT_MAX_STATEMENTS = 25_000;

interface NftBackendOptions {
  readonly runner: NftRunner;
  /** One table per family. */
  readonly tables: readonly TableConfig[];
  readonly log: Logger;
  readonly syncPeriodMs?: number;
  /** Told of every queued state and sync outcome: the node services (health, metrics, conntrack). */
  readonly observer?: SyncObserver;
  readonly maxStatementsPerTransaction?: number;
  readonly now?: () => number;
}

interface SyncReport {
  /** Transactions run, stale-object deletions included. */
  readonly transactions: number;
  /** The texts run, in order. */
  readonly texts: readonly string[];
}

export class NftBackend {
  readonly #o: Required<Omit<NftBackendOptions, "now">>;
  readonly #now: () => number;
  readonly #mirrors = new Map<NftFamily, TableMirror>();
  readonly #health = new Map<NftFamily, FamilyHealth & { retryAt: number }>();
  readonly #repeats = new Map<NftFamily, RepeatLimiter>();
  /** Set while run() runs: marks the state dirty and wakes the loop. */
  #kick: (() => void) | undefined;

  constructor(options: NftBackendOptions) {
    this.#o = {
      syncPeriodMs: 30_000,
      maxStatementsPerTransaction: DEFAULT_MAX_STATEMENTS,
      observer: NO_OBSERVER,
      ...options,
    };
    this.#now = options.now ?? Date.now;
    for (const cfg of this.#o.tables) {
      this.#health.set(cfg.family, { family: cfg.family, programmed: false, failures: 0, retryAt: 0 });
      this.#repeats.set(cfg.family, new RepeatLimiter({ now: this.#now }));
      programmedGauge.set({ family: cfg.family }, 0);
    }
  }

  /** Whether every table is programmed and in line, and what failed if not (for /healthz). */
  health(): BackendHealth {
    return summarize([...this.#health.values()].map(({ retryAt: _, ...h }) => h));
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
   * One sync of the tables (all, or those of `families`) to `state`. Every table is attempted;
   * throws after the others are done if one failed, having forgotten the failed table's mirror
   * so that its next sync re-reads the table and converges it.
   */
  async sync(state: LocalState, families?: ReadonlySet<NftFamily>): Promise<SyncReport> {
    const started = performance.now();
    const texts: string[] = [];
    const errors: TableSyncError[] = [];
    for (const cfg of this.#o.tables) {
      if (families !== undefined && !families.has(cfg.family)) continue;
      try {
        await this.#syncTable(cfg, state, texts);
        this.#succeeded(cfg.family);
      } catch (e) {
        this.#mirrors.delete(cfg.family);
        const error =
          e instanceof TableSyncError ? e : new TableSyncError(cfg.family, String(e), { cause: e });
        this.#failed(cfg, error);
        errors.push(error);
      }
    }
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, errors.map((e) => e.message).join("; "));
    syncDuration.observe((performance.now() - started) / 1000);
    // Not awaited: the next transaction queues behind it anyway.
    void this.#o.runner.prepare?.();
    return { transactions: texts.length, texts };
  }

  async #syncTable(cfg: TableConfig, state: LocalState, texts: string[]): Promise<void> {
    let mirror = this.#mirrors.get(cfg.family);
    if (!mirror) {
      let listing: unknown;
      try {
        listing = await this.#o.runner.listTable(cfg.family, cfg.table);
      } catch (e) {
        listingFailures.inc({ family: cfg.family });
        throw new TableSyncError(
          cfg.family,
          `cannot read table ${cfg.family} ${cfg.table}: ${messageOf(e)}`,
          {
            cause: e,
          },
        );
      }
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
        syncFailures.inc();
        const stderr = e instanceof NftError ? e.stderr : String(e);
        throw new TableSyncError(cfg.family, `nft transaction failed: ${messageOf(e)}`, {
          cause: e,
          stderr,
          transaction: excerptTransaction(tx.text, stderr),
        });
      }
    }
  }

  #succeeded(family: NftFamily): void {
    const h = this.#health.get(family);
    if (h && h.failures > 0) this.#o.log.info({ family }, "nft table in line again after failures");
    this.#health.set(family, {
      family,
      programmed: true,
      failures: 0,
      lastSuccessAt: this.#now(),
      retryAt: 0,
    });
    this.#repeats.get(family)?.reset();
    programmedGauge.set({ family }, 1);
  }

  #failed(cfg: TableConfig, error: TableSyncError): void {
    const h = this.#health.get(cfg.family) ?? { family: cfg.family, programmed: false, failures: 0 };
    const failures = h.failures + 1;
    const retryInMs = retryDelayMs(failures, this.#o.syncPeriodMs);
    this.#health.set(cfg.family, {
      ...h,
      failures,
      lastError: error.message,
      retryAt: this.#now() + retryInMs,
    });
    programmedGauge.set({ family: cfg.family }, 0);

    // The same failure again (positions aside) is logged at a decaying rate.
    const key = (error.stderr ?? error.message).replace(/\d+/g, "#");
    const decision = this.#repeats.get(cfg.family)?.hit(key) ?? { log: true, count: 1, suppressed: 0 };
    if (!decision.log) return;
    this.#o.log.error(
      {
        family: cfg.family,
        table: cfg.table,
        error: error.message,
        ...(error.stderr === undefined ? {} : { stderr: error.stderr.slice(0, 2000) }),
        ...(error.transaction === undefined ? {} : { transaction: error.transaction }),
        failures,
        ...(decision.suppressed > 0 ? { suppressedRepeats: decision.suppressed } : {}),
        retryInMs,
      },
      "nft sync failed; will retry with a full resync of the table",
    );
  }

  /** Runs until `signal` aborts, syncing each new state of `feed`; never waits for a hung nft to stop. */
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
    try {
      while (!signal.aborted) {
        const now = this.#now();
        // A failing table waits for its retry; the others follow every change.
        const failing = [...this.#health.values()].filter((h) => h.failures > 0);
        const retryAt = Math.min(...failing.map((h) => h.retryAt));
        const healthy = failing.length < this.#health.size;
        let due = Number.POSITIVE_INFINITY;
        if (latest !== undefined) {
          if (dirty && healthy) due = now;
          else if (this.hasStale) due = lastStart + STALE_DELETE_DELAY_MS;
          else if (failing.length === 0) due = lastStart + this.#o.syncPeriodMs;
          due = Math.min(due, retryAt);
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
        const families = new Set(
          [...this.#health.values()].filter((h) => h.failures === 0 || h.retryAt <= now).map((h) => h.family),
        );
        lastStart = now;
        dirty = false;
        const synced = latest;
        const full = [...families].some((f) => this.needsFullSync(f));
        const started = performance.now();
        try {
          const report = await unlessAborted(this.sync(synced, families), signal);
          if (report === ABORTED) break;
          if (report.transactions > 0) {
            this.#o.log.debug({ revision: synced.revision, transactions: report.transactions }, "nft synced");
          }
          // The observer's own errors are not sync failures.
          await observer
            .synced({ state: synced, full, durationMs: performance.now() - started })
            .catch((err: unknown) => this.#o.log.error({ err }, "node services failed after a sync"));
        } catch {
          // Logged, counted and scheduled for retry by sync().
          observer.failed();
        }
      }
    } finally {
      this.#kick = undefined;
      signal.removeEventListener("abort", onAbort);
      unsubscribe();
    }
  }
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
