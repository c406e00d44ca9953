// The nft backend: one table per family, kept in line with the latest local state by the shared
// sync loop (backend-core/sync-loop.ts: coalescing, periodic resync, per-family retry, repair).
// A family's sync diffs the state against its mirror of the table and applies the difference;
// a failed table is resynced from a fresh listing (its mirror is no longer trusted). The log
// shows the failing statement, not the whole transaction.

import { availableParallelism } from "node:os";
import type { BackendHealth } from "../../backend-core/family-health.ts";
import type { RulesProbe } from "../../backend-core/rules-probe.ts";
import {
  type BackendFamily,
  type FamilyApplied,
  FamilySyncError,
  SyncLoop,
  type SyncReport,
} from "../../backend-core/sync-loop.ts";
import { ipFamilyOfNft, type NftFamily } from "../../model/ip.ts";
import type { LocalState, LocalStateFeed } from "../../model/local.ts";
import type { SyncObserver } from "../../node/sync-observer.ts";
import type { Logger } from "../../observability/log.ts";
import { counter } from "../../observability/metrics.ts";
import { type AdoptedTable, readTable } from "./adopt.ts";
import { excerptTransaction } from "./failure-excerpt.ts";
import type { TableConfig } from "./fragment.ts";
import { STALE_DELETE_DELAY_MS, TableMirror } from "./mirror.ts";
import { type NftScript, renderScript } from "./ops.ts";
import { curableByRewrite, NftError, type NftRunner } from "./runner.ts";
import { type PackedTransaction, type Phase, packTransactions } from "./transaction.ts";
import { TransactionWindow } from "./transaction-window.ts";

/**
 * Statements per transaction on a large sync (each element counts as one): bounded so no single
 * `nft -f` grows without limit. Every `nft -f` first dumps all chains of the table, so smaller
 * chunks cost more in total: 44k services took 14.6 s with 10k, 8.1 s with 25k, 6.6 s with 50k.
 */
const DEFAULT_MAX_STATEMENTS = 25_000;

/**
 * A table written anew after repeated refusals (a foreign object in it) goes in one transaction
 * of up to this many times the usual statements, so that up to about 20k Services of 10
 * endpoints it replaces the old table atomically: traffic never meets a missing or half-written
 * table. Beyond, the first transaction deletes the old table and the rest follow.
 */
const REPLACE_FACTOR = 20;

/**
 * Transactions of element changes in flight at once on a large sync: one `nft` process per core
 * (nft parses on one core), at most four.
 */
const DEFAULT_CONCURRENCY = Math.min(4, availableParallelism());

const cleanupFailures = counter(
  "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
  "Failed deletions of chains and sets kpng no longer uses (the sync is retried).",
  ["ip_family"],
);

const concurrentRetries = counter(
  "kpng_nftables_transaction_retries_total",
  "Transactions of element changes that failed while others were in flight and were applied again alone.",
  ["ip_family"],
);

interface NftBackendOptions {
  readonly runner: NftRunner;
  /**
   * The `backend` label of its metrics: "nftables", or the name of the backend whose companion
   * it is (two loops with one label would write one series).
   */
  readonly backend?: string;
  /** One table per family. */
  readonly tables: readonly TableConfig[];
  readonly log: Logger;
  readonly syncPeriodMs?: number;
  /** Told of every queued state and sync outcome: the node services (health, conntrack). */
  readonly observer?: SyncObserver;
  /** Checks between syncs that the tables still hold their rules. */
  readonly probe?: RulesProbe;
  readonly probeIntervalMs?: number;
  readonly maxStatementsPerTransaction?: number;
  /** How many transactions of element changes may be in flight at once (when the runner allows it). */
  readonly concurrentTransactions?: number;
  readonly now?: () => number;
}

export class NftBackend {
  readonly #runner: NftRunner;
  readonly #maxStatements: number;
  readonly #concurrency: number;
  readonly #now: () => number;
  readonly #mirrors = new Map<NftFamily, TableMirror>();
  /** Families whose next sync replaces the whole table without reading it (after reset()). */
  readonly #replacing = new Set<NftFamily>();
  /** Each family's table, replaced by reconfigure(). */
  readonly #tables = new Map<NftFamily, TableConfig>();
  readonly #loop: SyncLoop;
  readonly #log: Logger;

  constructor(options: NftBackendOptions) {
    this.#runner = options.runner;
    this.#log = options.log;
    this.#maxStatements = options.maxStatementsPerTransaction ?? DEFAULT_MAX_STATEMENTS;
    this.#concurrency = options.concurrentTransactions ?? DEFAULT_CONCURRENCY;
    this.#now = options.now ?? Date.now;
    for (const cfg of options.tables) this.#tables.set(cfg.family, cfg);
    this.#loop = new SyncLoop({
      backend: options.backend ?? "nftables",
      mode: "nftables",
      families: options.tables.map((cfg) => this.#family(cfg.family)),
      log: options.log,
      ...(options.syncPeriodMs === undefined ? {} : { syncPeriodMs: options.syncPeriodMs }),
      ...(options.observer === undefined ? {} : { observer: options.observer }),
      ...(options.probe === undefined ? {} : { probe: options.probe }),
      ...(options.probeIntervalMs === undefined ? {} : { probeIntervalMs: options.probeIntervalMs }),
      now: this.#now,
    });
  }

  #family(family: NftFamily): BackendFamily {
    cleanupFailures.inc({ ip_family: ipFamilyOfNft(family) }, 0);
    concurrentRetries.inc({ ip_family: ipFamilyOfNft(family) }, 0);
    const cfg = () => this.#tables.get(family) as TableConfig;
    return {
      family,
      ipFamilies: [ipFamilyOfNft(family)],
      apply: (state) => this.#syncTable(cfg(), state),
      forget: () => this.#mirrors.delete(family),
      followUpMs: () => (this.#mirrors.get(family)?.hasStale ? STALE_DELETE_DELAY_MS : undefined),
      // A foreign object in kpng's table (a set of another type, say) is refused in every transaction.
      reset: () => this.#replacing.add(family),
    };
  }

  /**
   * New node addresses for the tables (NodePort addresses, node IPs, pod CIDRs): each table is
   * rewritten in place at once by the sync loop, from a listing of what it holds, in the same
   * transactions as any resync, so traffic to the addresses that stay is never dropped.
   */
  reconfigure(tables: readonly TableConfig[]): void {
    for (const cfg of tables) if (this.#tables.has(cfg.family)) this.#tables.set(cfg.family, cfg);
    this.#loop.forceFullSync();
  }

  /** Whether every table is programmed and in line, and what failed if not (for /healthz). */
  health(): BackendHealth {
    return this.#loop.health();
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
    this.#loop.forceFullSync();
  }

  /**
   * One sync of the tables (all, or those of `families`) to `state`. Every table is attempted;
   * throws after the others are done if one failed, having forgotten the failed table's mirror
   * so that its next sync re-reads the table and converges it.
   */
  sync(state: LocalState, families?: ReadonlySet<NftFamily>): Promise<SyncReport> {
    return this.#loop.sync(state, families);
  }

  /** Runs until `signal` aborts, syncing each new state of `feed`; never waits for a hung nft to stop. */
  run(feed: LocalStateFeed, signal: AbortSignal): Promise<void> {
    return this.#loop.run(feed, signal);
  }

  async #syncTable(cfg: TableConfig, state: LocalState): Promise<FamilyApplied> {
    const replace = this.#replacing.delete(cfg.family);
    let mirror = replace ? undefined : this.#mirrors.get(cfg.family);
    const full = mirror === undefined;
    if (!mirror) {
      // A replaced table is planned as if there were none; its first transaction deletes the old.
      mirror = new TableMirror(cfg, replace ? undefined : await this.#read(cfg));
      this.#mirrors.set(cfg.family, mirror);
    }
    const plan = mirror.plan(state, this.#now());
    this.#log.trace({ family: cfg.family }, "nftables plan ready");
    // Units are built, packed and rendered as they are taken: while nft parses and commits one
    // transaction the next is rendered, and only a few are alive, whatever the size of the table.
    // A transaction starts only after everything before it succeeded, except in a run of element
    // changes, which commute and are applied several at once (TransactionWindow). The first
    // failure ends the sync (the mirror is then forgotten, and the next sync starts from a listing
    // of what the kernel holds).
    const limit = replace ? this.#maxStatements * REPLACE_FACTOR : this.#maxStatements;
    const txs = packTransactions(plan.units, cfg.family, cfg.table, limit);
    const cleanup =
      plan.deletions.length > 0 ? renderScript(plan.deletions, cfg.family, cfg.table) : undefined;
    const concurrent = this.#runner.runConcurrently !== undefined && this.#concurrency > 1;
    const window = new TransactionWindow(this.#concurrency);
    let transactions = 0;
    let bytes = 0;
    let next: PackedTransaction | undefined =
      cleanup === undefined ? txs.next().value : { ...cleanup, commutesWithin: undefined };
    if (replace && next !== undefined) next = replacing(cfg, next);
    let isCleanup = cleanup !== undefined;
    /** The phase of the transactions in the window. */
    let flying: Phase | undefined;
    while (next !== undefined) {
      const tx = next;
      transactions++;
      bytes += Buffer.byteLength(tx.text);
      if (!concurrent || tx.commutesWithin === undefined) {
        await window.drain();
        const applying = this.#apply(cfg, tx, isCleanup, false);
        // Rendering may throw while nft runs: the failure reported is then the render's.
        applying.catch(() => {});
        isCleanup = false;
        next = txs.next().value;
        await applying;
        continue;
      }
      // A phase's transactions all apply before the next phase's start.
      if (tx.commutesWithin !== flying) await window.drain();
      flying = tx.commutesWithin;
      // Rendered before this one starts: it runs beside others only in a run of such transactions,
      // so a change of one transaction keeps the fast path (one line to `nft -i`).
      next = txs.next().value;
      if (window.empty && next?.commutesWithin !== flying) {
        await this.#apply(cfg, tx, false, false);
        continue;
      }
      await window.room();
      if (window.failed) break;
      window.start(
        () => this.#apply(cfg, tx, false, true),
        (error) => {
          concurrentRetries.inc({ ip_family: ipFamilyOfNft(cfg.family) });
          this.#log.warn(
            { family: cfg.family, err: messageOf(error) },
            "an nftables transaction failed beside others; applying it again alone",
          );
          return this.#apply(cfg, tx, false, false);
        },
      );
    }
    await window.drain();
    // Not awaited: the next transaction queues behind it anyway.
    void this.#runner.prepare?.();
    return { full, transactions, bytes };
  }

  async #read(cfg: TableConfig): Promise<AdoptedTable | undefined> {
    try {
      return await readTable(this.#runner, cfg.family, cfg.table);
    } catch (e) {
      throw new FamilySyncError(`cannot read table ${cfg.family} ${cfg.table}: ${messageOf(e)}`, {
        cause: e,
        fields: { table: cfg.table },
        resettable: curableByRewrite(e),
      });
    }
  }

  async #apply(cfg: TableConfig, tx: NftScript, cleanup: boolean, concurrently: boolean): Promise<void> {
    try {
      this.#log.trace({ family: cfg.family, bytes: tx.text.length }, "nftables transaction rendered");
      if (concurrently && this.#runner.runConcurrently) await this.#runner.runConcurrently(tx.text);
      else await this.#runner.run(tx.text, tx.line);
      this.#log.trace({ family: cfg.family }, "nftables transaction applied");
    } catch (e) {
      if (cleanup) cleanupFailures.inc({ ip_family: ipFamilyOfNft(cfg.family) });
      const stderr = e instanceof NftError ? e.stderr : String(e);
      throw new FamilySyncError(`nft transaction failed: ${messageOf(e)}`, {
        cause: e,
        repeatKey: stderr,
        resettable: curableByRewrite(e),
        fields: {
          table: cfg.table,
          stderr: stderr.slice(0, 2000),
          transaction: excerptTransaction(tx.text, stderr),
        },
      });
    }
  }
}

/**
 * `tx` preceded by the deletion of whatever the table holds (`add` first: deleting a missing
 * table fails), in the same transaction: nft applies both or neither.
 */
function replacing(cfg: TableConfig, tx: PackedTransaction): PackedTransaction {
  const head = `add table ${cfg.family} ${cfg.table}\ndelete table ${cfg.family} ${cfg.table}\n`;
  return { text: head + tx.text, commutesWithin: undefined };
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
