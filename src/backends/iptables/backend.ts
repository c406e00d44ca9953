// The iptables backend, driven by the shared sync loop (backend-core/sync-loop.ts). Each family
// is synced on its own: one family's failure never holds the other. A family's sync writes
// `iptables-restore --noflush` input:
// - a full sync (at start, at a periodic resync the probe could not confirm, after a failure,
//   after the probe found the rules flushed) reads the tables first, rewrites every kpng chain, repairs the jumps from the
//   built-in chains and re-creates the canary chains; at start this adopts what a previous
//   process left, without a gap in service;
// - a partial sync rewrites the shared chains and only the chains of services whose rules
//   changed.
// Each table's COMMIT is atomic. With iptables-nft, a sync writing many chains is split into
// several nat restores: first the chains service chains jump to, then the service chains (a
// service's chains always in one restore, so each service changes at once), then the dispatch
// chains and jump repairs; nothing jumps to a chain before it exists.
// The KPNG- chains nothing uses any more (services gone, or left by an older run) are deleted
// afterwards in a restore of their own, best effort: a foreign rule that still jumps to one
// (`CHAIN_DEL … busy`) leaves it in place, logged, to be retried at the next sync, and never
// fails the sync.

import type { BackendHealth } from "../../backend-core/family-health.ts";
import type { FamilySettings } from "../../backend-core/family-settings.ts";
import {
  type BackendFamily,
  type FamilyApplied,
  FamilySyncError,
  SyncLoop,
  type SyncReport,
} from "../../backend-core/sync-loop.ts";
import type { IPFamily } from "../../model/kube.ts";
import type { LocalService, LocalState, LocalStateFeed } from "../../model/local.ts";
import type { SyncObserver } from "../../node/sync-observer.ts";
import type { Logger } from "../../observability/log.ts";
import { counter } from "../../observability/metrics.ts";
import { RepeatLimiter } from "../../observability/repeat-limiter.ts";
import { SHARED_CHAINS } from "./names.ts";
import type { PacketCounters } from "./packet-counters.ts";
import { type ServiceRules, serviceRules } from "./render-service.ts";
import { partialRestoreFailed, recordRules, rulesWritten, zeroRuleMetrics } from "./rule-metrics.ts";
import { IptablesRulesProbe, type ProbePoint } from "./rules-probe.ts";
import {
  BUILTIN_JUMPS,
  jumpFixes,
  STATIC_FILTER_CHAINS,
  STATIC_NAT_CHAINS,
  staticRules,
  type TableInput,
  tableText,
} from "./ruleset.ts";
import { IptablesError, type IptablesRunner } from "./runner.ts";
import { type KpngObjects, parseSave } from "./saved.ts";

const staleLeft = counter(
  "kpng_iptables_stale_chain_deletion_failures_total",
  "Syncs after which unused KPNG- chains could not be deleted (another rule uses them); retried at the next sync.",
  ["family"],
);

interface IptablesBackendOptions {
  readonly runner: IptablesRunner;
  /** One per family. */
  readonly families: readonly FamilySettings[];
  readonly log: Logger;
  /** Told of every queued state and sync outcome: the node services (health, conntrack). */
  readonly observer?: SyncObserver;
  readonly syncPeriodMs?: number;
  /** How often the probe checks, between syncs, that the rules are still in place. */
  readonly canaryIntervalMs?: number;
  readonly now?: () => number;
  /** Most service chains one restore writes; the rest go to further restores (default by variant). */
  readonly chunkChains?: number;
  /** Read before each IPv4 sync, which may restart the rule counters it reads. */
  readonly packetCounters?: PacketCounters;
}

interface FamilyState {
  /** Replaced by reconfigure(). */
  cfg: FamilySettings;
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
  /** KPNG- chains no longer used, to delete after the sync (best effort), by table. */
  stale: { nat: Set<string>; filter: Set<string> };
  readonly staleRepeats: RepeatLimiter;
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

/** Rules in kpng's own chains of a family, per table, once its pending input is applied. */
function ownedRules(f: FamilyState): { nat: number; filter: number } {
  const out = { nat: 0, filter: 0 };
  const lines = (text: string) => (text === "" ? 0 : text.split("\n").length);
  for (const [key, text] of f.pendingShared ?? []) {
    if (key.startsWith("nat/")) out.nat += lines(text);
    else if (key.startsWith("filter/")) out.filter += lines(text);
  }
  for (const { rules } of f.cache.values())
    for (const chain of rules.chains.values()) out.nat += chain.length;
  return out;
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

export class IptablesBackend {
  readonly #o: Required<Omit<IptablesBackendOptions, "now" | "chunkChains" | "observer" | "packetCounters">>;
  readonly #packetCounters: PacketCounters | undefined;
  readonly #chunkChains: number;
  readonly #families: FamilyState[];
  readonly #loop: SyncLoop;

  constructor(options: IptablesBackendOptions) {
    this.#o = { syncPeriodMs: 30_000, canaryIntervalMs: 2000, ...options };
    this.#packetCounters = options.packetCounters;
    this.#chunkChains =
      options.chunkChains ?? (options.runner.variant === "nft" ? NFT_CHUNK_CHAINS : Number.POSITIVE_INFINITY);
    const now = options.now ?? Date.now;
    this.#families = options.families.map((cfg) => ({
      cfg,
      cache: new Map(),
      applied: undefined,
      appliedShared: undefined,
      pendingShared: undefined,
      pendingChains: new Map(),
      pendingRemoved: [],
      serviceCIDRs: undefined,
      stale: { nat: new Set(), filter: new Set() },
      staleRepeats: new RepeatLimiter({ now }),
    }));
    this.#loop = new SyncLoop({
      backend: "iptables",
      families: this.#families.map((f) => this.#family(f)),
      log: options.log,
      syncPeriodMs: this.#o.syncPeriodMs,
      ...(options.observer === undefined ? {} : { observer: options.observer }),
      probe: new IptablesRulesProbe(options.runner, (family) => this.#probePoints(family)),
      probeIntervalMs: this.#o.canaryIntervalMs,
      now,
    });
  }

  #family(f: FamilyState): BackendFamily {
    zeroRuleMetrics(f.cfg.family);
    return {
      family: f.cfg.family,
      ipFamilies: [f.cfg.family],
      apply: (state, periodic) => this.#apply(f, state, periodic),
      forget: () => {
        f.applied = undefined;
        f.appliedShared = undefined;
      },
    };
  }

  /** Whether the next sync has to be a full one (start, or after a failure). */
  get needsFullSync(): boolean {
    return this.#families.some((f) => f.applied === undefined);
  }

  /** Whether every family is programmed and in line, and what failed if not. */
  health(): BackendHealth {
    return this.#loop.health();
  }

  /**
   * New node addresses for the rules (NodePort addresses, node IPs, pod CIDRs): every family is
   * rendered anew and written at once by the sync loop, as a full resync (one atomic restore
   * per table), so traffic to the addresses that stay is never dropped.
   */
  reconfigure(families: readonly FamilySettings[]): void {
    for (const f of this.#families) {
      const cfg = families.find((c) => c.family === f.cfg.family);
      if (cfg === undefined) continue;
      f.cfg = cfg;
      f.cache.clear();
    }
    this.#loop.forceFullSync();
  }

  /** Forget what was applied: the next sync is a full one. */
  forgetApplied(): void {
    this.#loop.forceFullSync();
  }

  /** The restore input a full sync of `state` would write to empty tables (for --dry-run). */
  plan(state: LocalState): string[] {
    return this.#families.map((f) => this.#text(f, state, true, undefined, false, false).join(""));
  }

  /**
   * One sync of every family (a full one with `forceFull`). Every family is attempted; throws
   * after the others are done if one failed, having made that family's next sync a full one.
   */
  async sync(state: LocalState, forceFull = false): Promise<SyncReport> {
    if (forceFull) this.forgetApplied();
    return this.#loop.sync(state);
  }

  /** Runs until `signal` aborts, syncing each new state of `feed`. */
  run(feed: LocalStateFeed, signal: AbortSignal): Promise<void> {
    return this.#loop.run(feed, signal);
  }

  async #apply(f: FamilyState, state: LocalState, periodic: boolean): Promise<FamilyApplied> {
    const full = periodic || f.applied === undefined;
    let written: readonly string[] = [];
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
      if (f.cfg.family === "IPv4") await this.#packetCounters?.sample();
      for (const part of parts) await this.#o.runner.restore(f.cfg.family, part);
      written = parts;
      recordRules(f.cfg.family, ownedRules(f), rulesWritten(parts));
    } catch (e) {
      if (!full) partialRestoreFailed(f.cfg.family);
      const stderr = e instanceof IptablesError ? e.stderr : String(e);
      throw new FamilySyncError(e instanceof Error ? e.message : String(e), {
        cause: e,
        repeatKey: stderr,
        fields: { stderr: stderr.slice(0, 2000) },
      });
    }
    f.appliedShared = f.pendingShared;
    const applied = full || f.applied === undefined ? new Map<string, string>() : f.applied;
    for (const [name, chainText] of f.pendingChains) applied.set(name, chainText);
    for (const name of f.pendingRemoved) applied.delete(name);
    f.applied = applied;
    written = [...written, ...(await this.#deleteStale(f))];
    return {
      full,
      transactions: written.length,
      bytes: written.reduce((n, t) => n + Buffer.byteLength(t), 0),
    };
  }

  /**
   * Deletes the chains nothing of kpng's uses any more, in a restore of their own; when that
   * fails (a foreign rule jumps to one of them), one chain per restore, again while that frees
   * more (a stale chain may be what still jumps to another), so that only the busy ones stay for
   * the next sync to try again. Never throws. Returns the inputs applied.
   */
  async #deleteStale(f: FamilyState): Promise<string[]> {
    const out: string[] = [];
    const remove = async (
      table: "nat" | "filter",
      chains: readonly string[],
    ): Promise<string | undefined> => {
      const text = tableText(table, { declare: [], rules: [], remove: chains });
      try {
        await this.#o.runner.restore(f.cfg.family, text);
        for (const c of chains) f.stale[table].delete(c);
        out.push(text);
        return undefined;
      } catch (e) {
        return e instanceof IptablesError ? e.stderr : String(e);
      }
    };
    for (const table of ["nat", "filter"] as const) {
      const stale = f.stale[table];
      if (stale.size === 0 || (await remove(table, [...stale])) === undefined) continue;
      let stderr = "";
      for (let progress = true; progress && stale.size > 0; ) {
        progress = false;
        for (const chain of [...stale]) {
          const error = await remove(table, [chain]);
          if (error === undefined) progress = true;
          else stderr = error;
        }
      }
      if (stale.size === 0) continue;
      staleLeft.inc({ family: f.cfg.family });
      const chains = [...stale].sort();
      const decision = f.staleRepeats.hit(chains.join(","));
      if (decision.log)
        this.#o.log.warn(
          { family: f.cfg.family, table, chains, stderr: stderr.slice(0, 500), attempts: decision.count },
          "cannot delete unused kpng chains (another rule still uses them?); will try again at the next sync",
        );
    }
    return out;
  }

  /** What the probe checks in a family: the rules that are always there once a sync succeeded. */
  #probePoints(family: IPFamily): ProbePoint[] {
    const f = this.#families.find((x) => x.cfg.family === family);
    if (!f?.appliedShared) return [];
    const points: ProbePoint[] = [
      { table: "nat", chain: "PREROUTING", rule: BUILTIN_JUMPS.nat.PREROUTING?.[0] ?? "" },
      { table: "nat", chain: SHARED_CHAINS.postrouting },
      { table: "filter", chain: "INPUT", rule: BUILTIN_JUMPS.filter.INPUT?.[0] ?? "" },
    ];
    if ((f.appliedShared.get(`nat/${SHARED_CHAINS.services}`) ?? "") !== "")
      points.push({ table: "nat", chain: SHARED_CHAINS.services });
    return points;
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
    const cidrs = state.serviceCIDRs[f.cfg.family].join(",");
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
    record = true,
  ): string[] {
    const { changed, sharedChanged } = this.#render(f, state);
    // An endpoint change leaves the shared chains alone: they are not even rebuilt (O(changed)).
    const reuseShared = !full && !sharedChanged && f.appliedShared !== undefined;
    const shared = reuseShared
      ? { nat: [], filter: [] }
      : staticRules(
          f.cfg,
          [...f.cache.values()].map((s) => s.rules),
          state.serviceCIDRs[f.cfg.family],
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
    // A chain wanted again before its deletion succeeded is kpng's again.
    for (const c of wanted) f.stale.nat.delete(c);
    f.pendingShared = sharedChains;
    const staticNat = new Set<string>([...STATIC_NAT_CHAINS, SHARED_CHAINS.canary]);
    const staticFilter = new Set<string>([...STATIC_FILTER_CHAINS, SHARED_CHAINS.canary]);
    const existingNat = full ? (saved?.nat.chains ?? []) : (f.applied?.keys() ?? []);
    const natRemove = [...existingNat].filter((c) => !wanted.has(c) && !staticNat.has(c));
    f.pendingRemoved = natRemove;
    const filterRemove = full ? [...(saved?.filter.chains ?? [])].filter((c) => !staticFilter.has(c)) : [];
    if (record) {
      for (const c of natRemove) f.stale.nat.add(c);
      for (const c of filterRemove) f.stale.filter.add(c);
    }
    const canary = full ? [SHARED_CHAINS.canary] : [];
    const filter: TableInput = {
      declare: [...filterChunk.declare, ...canary],
      rules: [...filterChunk.rules, ...(full ? jumpFixes("filter", saved?.filter) : [])],
      remove: record ? [] : filterRemove,
    };
    const finalNat: TableInput = {
      declare: [...late.declare, ...canary],
      rules: [...late.rules, ...(full ? jumpFixes("nat", saved?.nat) : [])],
      remove: record ? [] : natRemove,
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
}
