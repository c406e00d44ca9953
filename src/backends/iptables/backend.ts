// The iptables sync loop. Each sync writes one `iptables-restore --noflush` input per family:
// - a full sync (at start, every syncPeriod, after a failure, after a flush was detected) reads
//   the tables first, rewrites every kpng chain, repairs the jumps from the built-in chains,
//   deletes the KPNG- chains nothing uses (left by an older run or version) and re-creates the
//   canary chains; at start this adopts what a previous process left, without a gap in service;
// - a partial sync rewrites the shared chains and only the chains of services whose rules
//   changed, and deletes the chains of services that went away.
// Each table's COMMIT is atomic. With iptables-nft, a sync writing many chains is split into
// several nat restores: first the chains service chains jump to, then the service chains (a
// service's chains always in one restore, so each service changes at once), then the dispatch
// chains, jump repairs and deletions; nothing jumps to a chain before it exists.
// Between syncs, the canary chains are checked every canaryIntervalMs; a missing one means
// someone flushed the tables, and a full sync follows at once.

import { Counter, Histogram } from "prom-client";
import type { FamilySettings } from "../../backend-core/family-settings.ts";
import type { LocalService, LocalState, LocalStateFeed } from "../../model/local.ts";
import { NO_OBSERVER, type SyncObserver } from "../../node/sync-observer.ts";
import type { Logger } from "../../observability/log.ts";
import { registry } from "../../observability/metrics.ts";
import { SHARED_CHAINS } from "./names.ts";
import { type ServiceRules, serviceRules } from "./render-service.ts";
import {
  jumpFixes,
  STATIC_FILTER_CHAINS,
  STATIC_NAT_CHAINS,
  staticRules,
  type TableInput,
  tableText,
} from "./ruleset.ts";
import { IptablesError, type IptablesRunner, type Table } from "./runner.ts";
import { type KpngObjects, parseSave } from "./saved.ts";

const syncDuration = new Histogram({
  name: "kpng_iptables_sync_duration_seconds",
  help: "Time to bring the iptables rules in line with a new local state, by kind of sync.",
  labelNames: ["kind"],
  buckets: [0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [registry],
});

const syncFailures = new Counter({
  name: "kpng_iptables_sync_failures_total",
  help: "iptables-restore runs that failed; each one is followed by a retried full sync.",
  registers: [registry],
});

const flushesDetected = new Counter({
  name: "kpng_iptables_flushes_detected_total",
  help: "Times a canary chain was found missing (the tables were flushed by someone else).",
  registers: [registry],
});

interface IptablesBackendOptions {
  readonly runner: IptablesRunner;
  /** One per family. */
  readonly families: readonly FamilySettings[];
  readonly log: Logger;
  /** Told of every queued state and sync outcome: the node services (health, metrics, conntrack). */
  readonly observer?: SyncObserver;
  readonly syncPeriodMs?: number;
  readonly canaryIntervalMs?: number;
  readonly now?: () => number;
  /** Most service chains one restore writes; the rest go to further restores (default by variant). */
  readonly chunkChains?: number;
}

interface SyncReport {
  readonly full: boolean;
  /** The restore inputs run, one per family. */
  readonly texts: readonly string[];
}

interface FamilyState {
  readonly cfg: FamilySettings;
  /** Rendered rules by service key; reused while the service object is the same. */
  readonly cache: Map<string, { readonly svc: LocalService; readonly rules: ServiceRules }>;
  /** The service chains as last applied (name → text); undefined until a full sync succeeds. */
  applied: Map<string, string> | undefined;
  /** The shared chains as last applied (`table/name` → text). */
  appliedShared: Map<string, string> | undefined;
  /** The shared chains of the restore input being applied. */
  pendingShared: Map<string, string> | undefined;
  /** Service chains written, and chains removed, by the restore input being applied. */
  pendingChains: Map<string, string>;
  pendingRemoved: string[];
  /** The Service CIDRs of the last render, joined. */
  serviceCIDRs: string | undefined;
}

function sameLines(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((l, i) => l === b[i]);
}

/** Whether two renders of a service put the same lines into the shared chains. */
function sameSharedLines(a: ServiceRules, b: ServiceRules): boolean {
  return (
    sameLines(a.natServices, b.natServices) &&
    sameLines(a.natNodePorts, b.natNodePorts) &&
    sameLines(a.filterServices, b.filterServices) &&
    sameLines(a.filterNodePorts, b.filterNodePorts) &&
    sameLines(a.filterFirewall, b.filterFirewall) &&
    sameLines(a.clusterIPs, b.clusterIPs)
  );
}

interface Chunk {
  readonly declare: string[];
  readonly rules: string[];
}

/** The nat chains that jump to service chains: written after them. */
const DISPATCH_CHAINS: ReadonlySet<string> = new Set([SHARED_CHAINS.services, SHARED_CHAINS.nodePorts]);

/**
 * iptables-nft-restore keeps the names of the chains an input mentions in a sorted list, and finds
 * each `-A` chain and `-j` target by walking it from the start: quadratic in the chains of one
 * input (measured: 1000 services 0.36 s, 2000 services 1.05 s, 10000 services 15 s). Syncs that
 * write more chains than this are split into several restores of this many chains or fewer.
 * iptables-legacy replaces the whole table on every restore, so it gets one restore per table.
 */
const NFT_CHUNK_CHAINS = 1000;

function isEmpty(t: TableInput): boolean {
  return t.declare.length === 0 && t.rules.length === 0 && t.remove.length === 0;
}

/** Groups `-A NAME …` lines by chain; every name in `names` gets an entry, empty or not. */
function byChain(names: readonly string[], lines: readonly string[]): Map<string, string[]> {
  const out = new Map<string, string[]>(names.map((n) => [n, []]));
  for (const l of lines) {
    const name = l.slice(3, l.indexOf(" ", 3));
    out.get(name)?.push(l);
  }
  return out;
}

const CANARY_TABLES: readonly Table[] = ["mangle", "nat", "filter"];

export class IptablesBackend {
  readonly #o: Required<Omit<IptablesBackendOptions, "now" | "chunkChains">>;
  readonly #now: () => number;
  readonly #chunkChains: number;
  readonly #families: FamilyState[];

  constructor(options: IptablesBackendOptions) {
    this.#o = { syncPeriodMs: 30_000, canaryIntervalMs: 2000, observer: NO_OBSERVER, ...options };
    this.#now = options.now ?? Date.now;
    this.#chunkChains =
      options.chunkChains ?? (options.runner.variant === "nft" ? NFT_CHUNK_CHAINS : Number.POSITIVE_INFINITY);
    this.#families = options.families.map((cfg) => ({
      cfg,
      cache: new Map(),
      applied: undefined,
      appliedShared: undefined,
      pendingShared: undefined,
      pendingChains: new Map(),
      pendingRemoved: [],
      serviceCIDRs: undefined,
    }));
  }

  /** Whether the next sync has to be a full one (start, or after a failure). */
  get needsFullSync(): boolean {
    return this.#families.some((f) => f.applied === undefined);
  }

  /** Forget what was applied: the next sync is a full one. */
  forgetApplied(): void {
    for (const f of this.#families) {
      f.applied = undefined;
      f.appliedShared = undefined;
    }
  }

  /** The restore input a full sync of `state` would write to empty tables (for --dry-run). */
  plan(state: LocalState): string[] {
    return this.#families.map((f) => this.#text(f, state, true, undefined, false).join(""));
  }

  /** One sync of every family. Throws on failure, after making the next sync a full one. */
  async sync(state: LocalState, forceFull = false): Promise<SyncReport> {
    const started = performance.now();
    const full = forceFull || this.needsFullSync;
    const texts: string[] = [];
    for (const f of this.#families) {
      try {
        let saved: { nat: KpngObjects; filter: KpngObjects } | undefined;
        if (full) {
          saved = {
            nat: parseSave(await this.#o.runner.save(f.cfg.family, "nat")),
            filter: parseSave(await this.#o.runner.save(f.cfg.family, "filter")),
          };
        }
        // One restore per table (iptables-nft-restore is several times slower on one input
        // holding a big nat and a big filter table), and with iptables-nft several for a nat
        // table with many chains to write: see NFT_CHUNK_CHAINS.
        const parts = this.#text(f, state, full, saved);
        for (const part of parts) await this.#o.runner.restore(f.cfg.family, part);
        texts.push(parts.join(""));
        f.appliedShared = f.pendingShared;
        const applied = full || f.applied === undefined ? new Map<string, string>() : f.applied;
        for (const [name, text] of f.pendingChains) applied.set(name, text);
        for (const name of f.pendingRemoved) applied.delete(name);
        f.applied = applied;
      } catch (e) {
        this.forgetApplied();
        syncFailures.inc();
        const stderr = e instanceof IptablesError ? e.stderr : String(e);
        this.#o.log.error(
          { family: f.cfg.family, stderr },
          "iptables-restore failed; will retry with a full sync",
        );
        throw e;
      }
    }
    syncDuration.observe({ kind: full ? "full" : "partial" }, (performance.now() - started) / 1000);
    return { full, texts };
  }

  /**
   * Renders the services whose object changed; returns their keys, and whether the shared chains'
   * lines can have changed (a service came or went, or a changed one has other shared lines).
   */
  #render(f: FamilyState, state: LocalState): { changed: Set<string>; sharedChanged: boolean } {
    const changed = new Set<string>();
    let sharedChanged = false;
    for (const [key, svc] of state.services) {
      const before = f.cache.get(key);
      if (before?.svc !== svc) {
        const rules = serviceRules(svc, f.cfg);
        f.cache.set(key, { svc, rules });
        changed.add(key);
        if (!sharedChanged && (before === undefined || !sameSharedLines(before.rules, rules)))
          sharedChanged = true;
      }
    }
    for (const key of f.cache.keys())
      if (!state.services.has(key)) {
        f.cache.delete(key);
        sharedChanged = true;
      }
    const cidrs = state.serviceCIDRs.join(",");
    if (cidrs !== f.serviceCIDRs) sharedChanged = true;
    f.serviceCIDRs = cidrs;
    return { changed, sharedChanged };
  }

  #text(
    f: FamilyState,
    state: LocalState,
    full: boolean,
    saved: { nat: KpngObjects; filter: KpngObjects } | undefined,
    chunked = true,
  ): string[] {
    const { changed, sharedChanged } = this.#render(f, state);
    // An endpoint change leaves the shared chains alone: they are not even rebuilt (O(changed)).
    const reuseShared = !full && !sharedChanged && f.appliedShared !== undefined;
    const shared = reuseShared
      ? { nat: [], filter: [] }
      : staticRules(
          f.cfg,
          [...f.cache.values()].map((s) => s.rules),
          state.serviceCIDRs,
        );
    const sharedChains = reuseShared
      ? (f.appliedShared ?? new Map<string, string>())
      : new Map<string, string>();
    // nat's shared chains: the ones service chains jump to go first, the dispatch chains (which
    // jump to service chains) last.
    const early: Chunk = { declare: [], rules: [] };
    const late: Chunk = { declare: [], rules: [] };
    const filterChunk: Chunk = { declare: [], rules: [] };
    // Shared chains are rewritten when their rules changed (an endpoint change usually leaves
    // them alone), and on every full sync.
    for (const [table, names, lines] of reuseShared
      ? []
      : ([
          ["nat", STATIC_NAT_CHAINS, shared.nat],
          ["filter", STATIC_FILTER_CHAINS, shared.filter],
        ] as const)) {
      for (const [name, rules] of byChain(names, lines)) {
        const text = rules.join("\n");
        sharedChains.set(`${table}/${name}`, text);
        if (full || f.appliedShared?.get(`${table}/${name}`) !== text) {
          const out = table === "filter" ? filterChunk : DISPATCH_CHAINS.has(name) ? late : early;
          out.declare.push(name);
          out.rules.push(...rules);
        }
      }
    }
    const wanted = new Set<string>();
    const pendingChains = new Map<string, string>();
    // One group per service: a service's chains always go to the kernel together.
    const groups: Chunk[] = [];
    for (const [key, { rules: r }] of f.cache) {
      // A service whose object is the same as at the last sync has the same chains.
      const recheck = full || f.applied === undefined || changed.has(key);
      const group: Chunk = { declare: [], rules: [] };
      for (const [name, rules] of r.chains) {
        wanted.add(name);
        if (!recheck) continue;
        const text = rules.join("\n");
        if (full || f.applied?.get(name) !== text) {
          group.declare.push(name);
          group.rules.push(...rules);
          pendingChains.set(name, text);
        }
      }
      if (group.declare.length > 0) groups.push(group);
    }
    f.pendingChains = pendingChains;
    f.pendingShared = sharedChains;
    const staticNat = new Set<string>([...STATIC_NAT_CHAINS, SHARED_CHAINS.canary]);
    const staticFilter = new Set<string>([...STATIC_FILTER_CHAINS, SHARED_CHAINS.canary]);
    const existingNat = full ? (saved?.nat.chains ?? []) : (f.applied?.keys() ?? []);
    const natRemove = [...existingNat].filter((c) => !wanted.has(c) && !staticNat.has(c));
    f.pendingRemoved = natRemove;
    const filterRemove = full ? [...(saved?.filter.chains ?? [])].filter((c) => !staticFilter.has(c)) : [];
    const canary = full ? [SHARED_CHAINS.canary] : [];
    const filter: TableInput = {
      declare: [...filterChunk.declare, ...canary],
      rules: [...filterChunk.rules, ...(full ? jumpFixes("filter", saved?.filter) : [])],
      remove: filterRemove,
    };
    const finalNat: TableInput = {
      declare: [...late.declare, ...canary],
      rules: [...late.rules, ...(full ? jumpFixes("nat", saved?.nat) : [])],
      remove: natRemove,
    };
    const natParts: TableInput[] = [];
    const limit = chunked ? this.#chunkChains : Number.POSITIVE_INFINITY;
    let current: Chunk = early;
    for (const g of groups) {
      if (current.declare.length > 0 && current.declare.length + g.declare.length > limit) {
        natParts.push({ ...current, remove: [] });
        current = { declare: [], rules: [] };
      }
      current.declare.push(...g.declare);
      current.rules.push(...g.rules);
    }
    if (natParts.length === 0) {
      // One restore holds the whole table: one atomic COMMIT.
      natParts.push({
        declare: [...current.declare, ...finalNat.declare],
        rules: [...current.rules, ...finalNat.rules],
        remove: finalNat.remove,
      });
    } else {
      natParts.push({ ...current, remove: [] }, finalNat);
    }
    const mangle: TableInput = { declare: canary, rules: [], remove: [] };
    const tables: [string, TableInput][] = [
      ["filter", filter],
      ...natParts.map((t): [string, TableInput] => ["nat", t]),
      ["mangle", mangle],
    ];
    return tables.filter(([, t]) => !isEmpty(t)).map(([name, t]) => tableText(name, t));
  }

  /** True when every canary chain is still there. */
  async canariesPresent(): Promise<boolean> {
    for (const f of this.#families) {
      for (const table of CANARY_TABLES) {
        if (!(await this.#o.runner.chainExists(f.cfg.family, table, SHARED_CHAINS.canary))) return false;
      }
    }
    return true;
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
    const onAbort = () => wake?.();
    signal.addEventListener("abort", onAbort);
    let lastFull = Number.NEGATIVE_INFINITY;
    let lastCanary = Number.NEGATIVE_INFINITY;
    let forceFull = false;
    let failures = 0;
    let retryAt = 0;
    try {
      while (!signal.aborted) {
        const now = this.#now();
        let due = Number.POSITIVE_INFINITY;
        let canaryDue = Number.POSITIVE_INFINITY;
        if (latest !== undefined) {
          if (failures > 0) due = retryAt;
          // The feed is paced by --min-sync-period (pacedFeed): a new state is synced at once.
          else if (dirty || forceFull) due = now;
          else due = lastFull + this.#o.syncPeriodMs;
          if (failures === 0 && !this.needsFullSync) canaryDue = lastCanary + this.#o.canaryIntervalMs;
        }
        const next = Math.min(due, canaryDue);
        if (next > now || latest === undefined) {
          await new Promise<void>((resolve) => {
            const timer = Number.isFinite(next) ? setTimeout(resolve, next - now) : undefined;
            wake = () => {
              if (timer) clearTimeout(timer);
              resolve();
            };
          });
          wake = undefined;
          continue;
        }
        if (due > now) {
          lastCanary = now;
          const present = await this.canariesPresent().catch(() => false);
          if (!present) {
            flushesDetected.inc();
            this.#o.log.warn("a kpng canary chain is gone (tables flushed?); running a full sync");
            forceFull = true;
          }
          continue;
        }
        const full = forceFull || this.needsFullSync || now >= lastFull + this.#o.syncPeriodMs;
        dirty = false;
        try {
          const started = performance.now();
          const report = await this.sync(latest, full);
          // The observer's own errors are not sync failures.
          await observer
            .synced({ state: latest, full: report.full, durationMs: performance.now() - started })
            .catch((err: unknown) => this.#o.log.error({ err }, "node services failed after a sync"));
          if (report.full) lastFull = now;
          lastCanary = this.#now();
          forceFull = false;
          this.#o.log.debug({ revision: latest.revision, full: report.full }, "iptables synced");
          if (failures > 0)
            this.#o.log.info({ revision: latest.revision }, "iptables resynced after failure");
          failures = 0;
        } catch {
          failures++;
          observer.failed();
          const backoff = Math.min(1000 * 2 ** (failures - 1), Math.max(this.#o.syncPeriodMs, 1000));
          retryAt = this.#now() + backoff;
        }
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      unsubscribe();
    }
  }
}
