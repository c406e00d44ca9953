// The one sync loop of every backend (as kube-proxy's single bounded-frequency runner): keeps
// each IP family's rules in line with the latest local state.
// - States that arrive while a sync runs are coalesced: only the latest matters. The feed is
//   already spaced by --min-sync-period (plugin/paced-feed.ts), so a new state is synced at once;
//   with nothing new, every family is resynced once per sync period (the max sync period). With
//   a probe, a family it finds intact is confirmed rather than rewritten: the probe sees a flush
//   or a deleted table, not an edited rule, and it is what an idle proxy spends its CPU on.
// - Between syncs the backend's probe checks each programmed family; rules found flushed or
//   deleted by another program are counted, logged and rewritten by a full sync at once. A new
//   state never waits for this probe: it runs beside the loop, and a verdict of "lost" from a
//   probe that a sync overtook is dropped (the next probe decides). A sync that fails on rules
//   lost beneath it is a repair too, retried at once. The periodic resync's own check runs
//   beside the loop as well.
// - Families are applied independently: a failed family is logged (a recurring failure at a
//   decaying rate), counted, forgotten (its next sync reads the kernel and rewrites everything)
//   and retried with one backoff, while the other family keeps following every change. After
//   RESET_AFTER_FAILURES refusals in a row that a rewrite may cure (a foreign object in its
//   table), a backend that can writes what it owns in the family anew, with a warning and a
//   metric. Other failures (a deadline, a shortage) never do: the rules in place keep serving.
// - Shutdown never waits for a hung kernel call.

import { Backoff } from "../lib/backoff.ts";
import type { IPFamily } from "../model/kube.ts";
import type { LocalState, LocalStateFeed } from "../model/local.ts";
import { SyncMetrics } from "../node/sync-metrics.ts";
import { NO_OBSERVER, type SyncObserver } from "../node/sync-observer.ts";
import type { Logger } from "../observability/log.ts";
import { counter, gauge } from "../observability/metrics.ts";
import { RepeatLimiter } from "../observability/repeat-limiter.ts";
import { ABORTED, unlessAborted } from "./abort.ts";
import { type BackendFamilyHealth, type BackendHealth, summarize } from "./family-health.ts";
import { probeFailures, type RulesProbe, rulesRepairs } from "./rules-probe.ts";

const familyFailures = counter(
  "kpng_sync_failures_total",
  "Failed syncs of one IP family's rules (reading or applying); each is retried with a full resync.",
  ["backend", "family"],
);

const familyHealthy = gauge(
  "kpng_family_programmed",
  "1 when the family's rules are programmed and its last sync succeeded, else 0.",
  ["backend", "family"],
);

const familyResets = counter(
  "kpng_sync_resets_total",
  "Times a family's own rules were deleted and written anew after its syncs were refused repeatedly.",
  ["backend", "family"],
);

/** Consecutive curable refusals after which a family's own objects are deleted and written anew. */
export const RESET_AFTER_FAILURES = 3;

/** What one family's apply wrote. */
export interface FamilyApplied {
  /** True when it rewrote everything from a fresh read of the kernel. */
  readonly full: boolean;
  /** How many writes (transactions, restores) it gave the kernel; their texts are not kept. */
  readonly transactions: number;
  /** Their total size in bytes. */
  readonly bytes: number;
}

/** One IP family of a backend, as the loop drives it: its renderer and runner live behind it. */
export interface BackendFamily {
  readonly family: string;
  /** The IP families its apply programs: one, or both for a write that cannot be split. */
  readonly ipFamilies: readonly IPFamily[];
  /** Brings the family's rules in line with `state`; `periodic` marks the periodic resync. */
  apply(state: LocalState, periodic: boolean): Promise<FamilyApplied>;
  /** Forgets what was applied: the next apply reads the kernel and rewrites everything. */
  forget(): void;
  /** Delay from a sync's start after which deferred work (stale objects) is due, if any. */
  followUpMs?(): number | undefined;
  /**
   * Makes the next apply write every object the backend owns in this family anew, deleting what
   * is there (in its first write, where the backend can: the old rules serve until then).
   */
  reset?(): void;
}

/** A failure with what its log line should show besides the message. */
export class FamilySyncError extends Error {
  readonly fields: Readonly<Record<string, unknown>>;
  /** What identifies a repeat of the same failure (defaults to the message). */
  readonly repeatKey: string;
  /** Whether deleting the family's own objects and writing them anew may cure it. */
  readonly resettable: boolean;
  constructor(
    message: string,
    options: {
      cause?: unknown;
      fields?: Record<string, unknown>;
      repeatKey?: string;
      resettable?: boolean;
    },
  ) {
    super(message, { cause: options.cause });
    this.name = "FamilySyncError";
    this.fields = options.fields ?? {};
    this.repeatKey = options.repeatKey ?? message;
    this.resettable = options.resettable ?? false;
  }
}

interface SyncLoopOptions {
  /** kube-proxy's name of the mode ("nftables", "iptables"): the `backend` label of the metrics. */
  readonly backend: string;
  /** The mode when `backend` names a companion's rules ("ebpf-nftables" runs "nftables"). */
  readonly mode?: string;
  readonly families: readonly BackendFamily[];
  readonly log: Logger;
  /** The periodic resync, and the longest retry wait. */
  readonly syncPeriodMs?: number;
  readonly observer?: SyncObserver;
  readonly probe?: RulesProbe;
  readonly probeIntervalMs?: number;
  readonly now?: () => number;
}

/** What one sync wrote. */
export interface SyncReport {
  /** True when some family was rewritten in full from a fresh read of the kernel. */
  readonly full: boolean;
  /** How many writes it gave the kernel, stale-object deletions included. */
  readonly transactions: number;
  /** Their total size in bytes. */
  readonly bytes: number;
  /** The IP families whose rules now hold the synced state. */
  readonly programmed: readonly IPFamily[];
}

/** The `ip_family` label of a family's metrics. */
function familyLabel(f: BackendFamily): IPFamily | "" {
  return f.ipFamilies.length === 1 ? (f.ipFamilies[0] as IPFamily) : "";
}

interface FamilyRun {
  readonly target: BackendFamily;
  health: BackendFamilyHealth;
  retryAt: number;
  /** A sync succeeded since the last repair: the probe may check the family. */
  armed: boolean;
  readonly repeats: RepeatLimiter;
  /** 1 s doubling up to the sync period, without jitter: a node retries its own kernel. */
  readonly backoff: Backoff;
  /** Failures in a row that a reset may cure; any other outcome starts the count again. */
  curable: number;
}

export class SyncLoop {
  readonly #o: Required<Omit<SyncLoopOptions, "probe" | "mode">> & { probe: RulesProbe | undefined };
  readonly #families: FamilyRun[];
  readonly #metrics: SyncMetrics;
  /** Set while run() runs: marks the state dirty and wakes the loop. */
  #kick: (() => void) | undefined;

  constructor(options: SyncLoopOptions) {
    this.#o = {
      syncPeriodMs: 30_000,
      observer: NO_OBSERVER,
      probeIntervalMs: 1000,
      now: Date.now,
      ...options,
      probe: options.probe,
    };
    this.#metrics = new SyncMetrics(
      options.backend,
      options.families.map(familyLabel),
      this.#o.now,
      options.mode ?? options.backend,
    );
    this.#families = options.families.map((target) => {
      const labels = { backend: options.backend, family: target.family };
      familyHealthy.set(labels, 0);
      familyFailures.inc(labels, 0);
      if (target.reset) familyResets.inc(labels, 0);
      if (options.probe) rulesRepairs.inc(labels, 0);
      return {
        target,
        health: { family: target.family, programmed: false, failures: 0 },
        retryAt: 0,
        armed: false,
        repeats: new RepeatLimiter({ now: this.#o.now }),
        backoff: new Backoff({ initialMs: 1000, maxMs: Math.max(this.#o.syncPeriodMs, 1000), jitter: 0 }),
        curable: 0,
      };
    });
  }

  /** Whether every family is programmed and in line, and what failed if not (for /healthz). */
  health(): BackendHealth {
    return summarize(this.#families.map((f) => f.health));
  }

  /** Someone else changed the rules: forget what they hold and rewrite them at once. */
  forceFullSync(): void {
    for (const f of this.#families) f.target.forget();
    this.#kick?.();
  }

  /**
   * One sync of the families (all, or those named in `only`) to `state`. Every family is
   * attempted; throws after the others are done if one failed, having forgotten the failed one.
   */
  async sync(state: LocalState, only?: ReadonlySet<string>, periodic = false): Promise<SyncReport> {
    const { report, errors } = await this.#syncFamilies(state, only, periodic);
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, errors.map((e) => e.message).join("; "));
    return report;
  }

  /** Each family in turn, timed on its own for its metrics; failures are returned, not thrown. */
  async #syncFamilies(
    state: LocalState,
    only: ReadonlySet<string> | undefined,
    periodic: boolean,
  ): Promise<{ report: SyncReport; errors: Error[] }> {
    let transactions = 0;
    let bytes = 0;
    const programmed: IPFamily[] = [];
    const errors: Error[] = [];
    let full = false;
    for (const f of this.#families) {
      if (only !== undefined && !only.has(f.target.family)) continue;
      const label = familyLabel(f.target);
      const started = performance.now();
      try {
        if (f.target.reset && f.curable >= RESET_AFTER_FAILURES) this.#reset(f);
        const applied = await f.target.apply(state, periodic);
        const durationMs = performance.now() - started;
        transactions += applied.transactions;
        bytes += applied.bytes;
        programmed.push(...f.target.ipFamilies);
        full ||= applied.full;
        this.#succeeded(f);
        this.#metrics.synced(label, { state, full: applied.full, durationMs });
      } catch (e) {
        // The failure may be the flush itself (a probe that saw it first was overtaken by this
        // sync): that is a repair, retried at once rather than after a backoff.
        const lost = f.armed && (await this.#lostBeneath(f));
        f.target.forget();
        const error = e instanceof Error ? e : new Error(String(e));
        this.#failed(f, error, lost);
        this.#metrics.failed(label);
        errors.push(error);
      }
    }
    return { report: { full, transactions, bytes, programmed }, errors };
  }

  #reset(f: FamilyRun): void {
    f.curable = 0;
    familyResets.inc({ backend: this.#o.backend, family: f.target.family });
    this.#o.log.warn(
      { family: f.target.family, failures: f.health.failures },
      `${this.#o.backend} sync keeps being refused; writing everything kpng owns in this family anew`,
    );
    f.target.reset?.();
  }

  #succeeded(f: FamilyRun): void {
    const family = f.target.family;
    if (f.health.failures > 0)
      this.#o.log.info({ family }, `${this.#o.backend} family in line again after failures`);
    f.health = { family, programmed: true, failures: 0, lastSuccessAt: this.#o.now() };
    f.retryAt = 0;
    f.armed = true;
    f.repeats.reset();
    f.backoff.reset();
    f.curable = 0;
    familyHealthy.set({ backend: this.#o.backend, family }, 1);
  }

  #failed(f: FamilyRun, error: Error, retryNow = false): void {
    const family = f.target.family;
    const failures = f.health.failures + 1;
    const retryInMs = retryNow ? 0 : f.backoff.next();
    f.health = { ...f.health, failures, lastError: error.message };
    f.curable = error instanceof FamilySyncError && error.resettable ? f.curable + 1 : 0;
    f.retryAt = this.#o.now() + retryInMs;
    // Its next sync is a full one anyway: nothing for the probe to find.
    f.armed = false;
    familyHealthy.set({ backend: this.#o.backend, family }, 0);
    familyFailures.inc({ backend: this.#o.backend, family });
    // The same failure again (positions aside) is logged at a decaying rate.
    const key = (error instanceof FamilySyncError ? error.repeatKey : error.message).replace(/\d+/g, "#");
    const decision = f.repeats.hit(key);
    if (!decision.log) return;
    this.#o.log.error(
      {
        family,
        error: error.message,
        ...(error instanceof FamilySyncError ? error.fields : {}),
        failures,
        ...(decision.suppressed > 0 ? { suppressedRepeats: decision.suppressed } : {}),
        retryInMs,
      },
      `${this.#o.backend} sync failed; will retry with a full resync of the family`,
    );
  }

  /**
   * Checks every armed family; a lost one is forgotten, counted and logged. Returns the families
   * found intact (empty when there is no probe) and whether one was lost.
   */
  async #probe(
    superseded: () => boolean = () => false,
  ): Promise<{ readonly lost: boolean; readonly intact: ReadonlySet<string> }> {
    const probe = this.#o.probe;
    let lost = false;
    const intact = new Set<string>();
    for (const f of this.#families) {
      if (!probe || !f.armed) continue;
      const labels = { backend: this.#o.backend, family: f.target.family };
      let ok: boolean;
      try {
        ok = await probe.intact(f.target.family);
      } catch (err) {
        probeFailures.inc(labels);
        this.#o.log.warn({ family: f.target.family, err: String(err) }, "cannot check the rules");
        continue;
      }
      if (ok) {
        intact.add(f.target.family);
        continue;
      }
      // A sync started meanwhile: the check may have seen the rules between two of its
      // transactions. The next probe decides (or the sync, if it fails).
      if (superseded()) continue;
      this.#repairing(f);
      lost = true;
    }
    return { lost, intact };
  }

  /** After a failed sync of a family that was programmed: whether its rules were lost beneath it. */
  async #lostBeneath(f: FamilyRun): Promise<boolean> {
    const probe = this.#o.probe;
    if (!probe) return false;
    try {
      if (await probe.intact(f.target.family)) return false;
    } catch {
      // Cannot tell: an ordinary failure.
      return false;
    }
    this.#repairing(f);
    return true;
  }

  /** Counts and logs a family lost to another program, and forgets it so it is rewritten in full. */
  #repairing(f: FamilyRun): void {
    // Disarmed until the repair sync succeeds, so one flush is one repair.
    f.armed = false;
    f.target.forget();
    rulesRepairs.inc({ backend: this.#o.backend, family: f.target.family });
    this.#o.log.warn(
      { family: f.target.family },
      "the rules were deleted or flushed by another program; rewriting them",
    );
  }

  /**
   * The periodic resync of a state already applied: the families the probe finds intact hold
   * what was last applied, so rewriting them would redo work (at 100k Services, most of an idle
   * proxy's CPU). They are confirmed instead; the others are returned, to be synced.
   */
  async #confirm(families: ReadonlySet<string>, superseded: () => boolean): Promise<Set<string>> {
    const { intact } = await this.#probe(superseded);
    // A sync started meanwhile: its outcome stands (a family found intact before it may have
    // failed in it), and the next period checks again.
    if (superseded()) return new Set();
    const rest = new Set<string>();
    for (const f of this.#families) {
      if (!families.has(f.target.family)) continue;
      if (intact.has(f.target.family)) this.#succeeded(f);
      else rest.add(f.target.family);
    }
    this.#o.log.debug(
      { confirmed: [...intact].filter((family) => families.has(family)), resynced: [...rest] },
      `${this.#o.backend} periodic resync`,
    );
    return rest;
  }

  /** Whether some family's deferred work (see followUpMs) is due at `t`. */
  #followUpDue(lastStart: number, t: number): boolean {
    return this.#families.some((f) => {
      const followUp = f.target.followUpMs?.();
      return followUp !== undefined && lastStart + followUp <= t;
    });
  }

  /** Runs until `signal` aborts, syncing each new state of `feed`; never waits for a hung kernel call. */
  async run(feed: LocalStateFeed, signal: AbortSignal): Promise<void> {
    const { observer, now } = this.#o;
    let latest: LocalState | undefined;
    let dirty = false;
    let wake: (() => void) | undefined;
    const unsubscribe = feed.subscribe((s) => {
      latest = s;
      dirty = true;
      this.#metrics.queued(s);
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
    let lastPeriodic = Number.NEGATIVE_INFINITY;
    let lastProbe = Number.NEGATIVE_INFINITY;
    /** The probe in flight, if any: it runs beside the syncs, so a change never waits for it. */
    let probing: Promise<void> | undefined;
    /** Syncs started so far: a probe overtaken by one does not judge the rules lost. */
    let syncs = 0;
    /** The families the periodic resync's check did not find intact: resynced in full next. */
    let periodicRest: Set<string> | undefined;
    /** Starts a check beside the loop (the probe in flight); `then` hears its answer. */
    const beside = <T>(check: (superseded: () => boolean) => Promise<T>, then: (answer: T) => void) => {
      const startedAt = syncs;
      this.#o.log.trace(`${this.#o.backend} probe started`);
      probing = check(() => syncs !== startedAt || signal.aborted)
        .then(then)
        .catch((err: unknown) => this.#o.log.warn({ err: String(err) }, "cannot check the rules"))
        .finally(() => {
          this.#o.log.trace(`${this.#o.backend} probe done`);
          probing = undefined;
          lastProbe = now();
          wake?.();
        });
    };
    try {
      while (!signal.aborted) {
        const t = now();
        const failing = this.#families.filter((f) => f.health.failures > 0);
        const healthy = failing.length < this.#families.length;
        let due = Number.POSITIVE_INFINITY;
        let probeDue = Number.POSITIVE_INFINITY;
        if (latest !== undefined) {
          // A failing family waits for its retry; the others follow every change.
          if ((dirty || periodicRest !== undefined) && healthy) due = t;
          for (const f of this.#families) {
            const followUp = f.target.followUpMs?.();
            if (followUp !== undefined) due = Math.min(due, lastStart + followUp);
          }
          if (failing.length === 0) due = Math.min(due, lastPeriodic + this.#o.syncPeriodMs);
          due = Math.min(due, ...failing.map((f) => f.retryAt));
          if (this.#o.probe && probing === undefined && this.#families.some((f) => f.armed))
            probeDue = lastProbe + this.#o.probeIntervalMs;
        }
        const next = Math.min(due, probeDue);
        if (next > t || latest === undefined) {
          await new Promise<void>((resolve) => {
            const timer = Number.isFinite(next) ? setTimeout(resolve, next - t) : undefined;
            wake = () => {
              if (timer) clearTimeout(timer);
              resolve();
            };
          });
          wake = undefined;
          continue;
        }
        if (due > t) {
          lastProbe = t;
          beside(
            (superseded) => this.#probe(superseded),
            (probed) => {
              if (probed.lost) dirty = true;
            },
          );
          continue;
        }
        let families = new Set(
          this.#families.filter((f) => f.health.failures === 0 || f.retryAt <= t).map((f) => f.target.family),
        );
        // The first sync starts the period; it is not a periodic one.
        const first = lastPeriodic === Number.NEGATIVE_INFINITY;
        let periodic = !first && t >= lastPeriodic + this.#o.syncPeriodMs;
        if (periodic && !dirty && this.#o.probe && !this.#followUpDue(lastStart, t)) {
          if (probing === undefined) {
            // The period's check runs beside the loop too: a new state does not wait for it.
            lastPeriodic = t;
            const checked = families;
            beside(
              (superseded) => this.#confirm(checked, superseded),
              (rest) => {
                if (rest.size > 0) periodicRest = rest;
              },
            );
            continue;
          }
          // The probe's answer (its end wakes the loop) or a new state, whichever comes first.
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
          continue;
        }
        if (periodicRest !== undefined) {
          const rest = periodicRest;
          periodicRest = undefined;
          // What the period's check did not find intact is rewritten as the periodic resync; a
          // new state syncs every family instead, and the next period checks again.
          if (!dirty) {
            families = new Set([...families].filter((family) => rest.has(family)));
            // A failing family among them is rewritten by its own retry.
            if (families.size === 0) continue;
            periodic = true;
          }
        }
        lastStart = t;
        syncs++;
        if (periodic || first) lastPeriodic = t;
        dirty = false;
        const synced = latest;
        const started = performance.now();
        this.#o.log.trace({ revision: synced.revision, periodic }, `${this.#o.backend} sync started`);
        const result = await unlessAborted(this.#syncFamilies(synced, families, periodic), signal);
        if (result === ABORTED) break;
        const { report, errors } = result;
        if (report.programmed.length > 0) feed.programmed?.(synced, report.programmed);
        if (errors.length > 0) {
          // Logged, counted and scheduled for retry by #syncFamilies().
          observer.failed();
          continue;
        }
        lastProbe = now();
        if (report.transactions > 0)
          this.#o.log.debug(
            { revision: synced.revision, writes: report.transactions, bytes: report.bytes },
            `${this.#o.backend} synced`,
          );
        // The observer's own errors are not sync failures.
        await observer
          .synced({ state: synced, full: report.full, durationMs: performance.now() - started })
          .catch((err: unknown) => this.#o.log.error({ err }, "node services failed after a sync"));
      }
    } finally {
      this.#kick = undefined;
      signal.removeEventListener("abort", onAbort);
      unsubscribe();
    }
  }
}
