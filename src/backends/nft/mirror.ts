// The in-memory mirror of what kpng applied to one table, and the planner that turns a new local
// state into the smallest set of changes against it. Only the services the state's change log
// names since the last applied state are looked at, then diffed by object identity (the feed
// keeps unchanged services identical), chain by chain and element by element, so a sync costs
// O(what changed), never O(table).

import { ipFamilyOfNft } from "../../model/ip.ts";
import type { LocalService, LocalState } from "../../model/local.ts";
import { changedServiceKeys } from "../../model/local-changes.ts";
import type { AdoptedTable } from "./adopt.ts";
import { STATIC_SET_NAMES, skeletonOps, staticChainNames } from "./base.ts";
import { EndpointGroups } from "./endpoint-groups.ts";
import type { AffinitySetSpec, ChainSpec, Fragment, TableConfig } from "./fragment.ts";
import { EMPTY_FRAGMENT } from "./fragment.ts";
import { HairpinEndpoints } from "./hairpins.ts";
import { endpointsMaps, STATIC } from "./names.ts";
import { addressType, type NftOp, type SetDeclaration } from "./ops.ts";
import { serviceFragment } from "./render-service.ts";
import { serviceCIDROps } from "./service-cidrs.ts";
import { type ElementOp, PHASE, type Phase, type Unit } from "./transaction.ts";

/** A chain or set that is no longer used is flushed at once and deleted this long after. */
export const STALE_DELETE_DELAY_MS = 1000;

interface ChainState {
  /** undefined when the chain was adopted from an existing table and its rules are unknown. */
  rules: readonly string[] | undefined;
  staleSince: number | undefined;
}

/**
 * One key of a map or set. Which services want it, and with which value: the first one wins.
 * Nearly every key has one owner, so it is held inline; more go to `others`, in order.
 */
interface ElementState {
  readonly set: string;
  readonly key: string;
  applied: string | undefined;
  owner: string | undefined;
  value: string | undefined;
  others: Map<string, string> | undefined;
  /** On the current plan's touched list. */
  touched: boolean;
}

function addOwner(st: ElementState, owner: string, value: string): void {
  if (st.owner === undefined || st.owner === owner) {
    st.owner = owner;
    st.value = value;
  } else {
    st.others ??= new Map();
    st.others.set(owner, value);
  }
}

function removeOwner(st: ElementState, owner: string): void {
  if (st.owner !== owner) {
    st.others?.delete(owner);
    return;
  }
  const next = st.others?.entries().next().value;
  if (next === undefined) {
    st.owner = undefined;
    st.value = undefined;
    return;
  }
  st.owner = next[0];
  st.value = next[1];
  st.others!.delete(next[0]);
}

/** Adds an element to the plan's touched list, once. */
function touch(touched: ElementState[], st: ElementState): void {
  if (st.touched) return;
  st.touched = true;
  touched.push(st);
}

/** Element changes per unit: big enough to keep units few, small enough to pack transactions. */
const ELEMENTS_PER_UNIT = 256;

/** How the table holds a chain the plan writes: absent, with rules to flush, or empty. */
const CHAIN_ABSENT = 0;
const CHAIN_FILLED = 1;
const CHAIN_EMPTY = 2;
type ChainHeld = typeof CHAIN_ABSENT | typeof CHAIN_FILLED | typeof CHAIN_EMPTY;

/** Chains a plan writes in one phase, in order: the specs the fragments hold, and how each is held. */
interface ChainWrites {
  readonly specs: ChainSpec[];
  readonly held: ChainHeld[];
}

/**
 * What a plan owes the table, gathered by the walk over the changed services. It refers to the
 * fragments' own chains and to the mirror's element records; the operations and element keys
 * are built from it only as the transactions take them, so a cold start holds one transaction's
 * worth of them at a time, whatever the size of the cluster.
 */
interface Draft {
  /** The skeleton and the Service IP ranges. */
  readonly skeleton: Unit[];
  readonly sets: AffinitySetSpec[];
  readonly leafChains: ChainWrites;
  readonly entryChains: ChainWrites;
  readonly touched: ElementState[];
  /** Shared chains some service stopped using this plan. */
  readonly unshared: Set<string>;
  /** Chains no longer used, flushed last. */
  readonly staleFlushes: string[];
}

interface Plan {
  /** Deletions of objects stale for long enough: run first, in their own transaction. */
  readonly deletions: readonly NftOp[];
  /**
   * The units in order of application, each built when taken. Taking them records the plan as
   * applied, so they must be taken whole before the next plan (or the mirror discarded).
   */
  readonly units: Iterable<Unit>;
}

function equalRules(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((r, i) => r === b[i]);
}

export class TableMirror {
  /** The table's config with the generation of endpoint maps and pick chains this mirror writes. */
  readonly #cfg: TableConfig;
  readonly #staticChains: Set<string>;
  /** The static sets and this generation's endpoint maps: the skeleton's. */
  readonly #staticSets: ReadonlySet<string>;
  readonly #chains = new Map<string, ChainState>();
  readonly #sets = new Map<string, { staleSince: number | undefined }>();
  readonly #elements = new Map<string, Map<string, ElementState>>();
  readonly #services = new Map<string, { svc: LocalService; fragment: Fragment }>();
  /** How many service fragments use each shared chain. */
  readonly #sharedUsers = new Map<string, number>();
  /** The chains and sets waiting for deletion, so finding them never walks the whole table. */
  readonly #staleChains = new Set<string>();
  readonly #staleSets = new Set<string>();
  /** The state the mirror last planned to, which the next state's changes are counted from. */
  #applied: LocalState | undefined;
  /** The endpoints maps' elements, one list per service port. */
  readonly #groups: EndpointGroups;
  readonly #hairpins: HairpinEndpoints;
  #lastDeletion = Number.NEGATIVE_INFINITY;
  /** True until the first plan: the skeleton must be (re)written and unclaimed objects retired. */
  #fresh = true;
  /** The Service IP ranges (this family) last written to the table's range set. */
  #serviceCIDRs: readonly string[] = [];

  constructor(cfg: TableConfig, adopted?: AdoptedTable) {
    const generation = adopted?.generation ?? 0;
    this.#cfg = generation === (cfg.generation ?? 0) ? cfg : { ...cfg, generation };
    this.#staticChains = staticChainNames(cfg);
    const grouped = new Set(endpointsMaps(generation));
    this.#staticSets = new Set([...STATIC_SET_NAMES, ...grouped]);
    this.#hairpins = new HairpinEndpoints(STATIC.hairpin, adopted?.elements.get(STATIC.hairpin)?.keys());
    this.#groups = new EndpointGroups(
      new Map([...(adopted?.elements ?? new Map())].filter(([set]) => grouped.has(set))),
    );
    if (!adopted) return;
    for (const name of adopted.chains) {
      if (!this.#staticChains.has(name)) this.#chains.set(name, { rules: undefined, staleSince: undefined });
    }
    // The other generation's endpoint maps are claimed by no service: they are retired.
    for (const name of adopted.sets) {
      if (!this.#staticSets.has(name)) this.#sets.set(name, { staleSince: undefined });
    }
    for (const [set, elements] of adopted.elements) {
      if (grouped.has(set) || set === STATIC.hairpin) continue;
      const m = this.#elementsOf(set);
      for (const [key, value] of elements)
        m.set(key, {
          set,
          key,
          applied: value,
          owner: undefined,
          value: undefined,
          others: undefined,
          touched: false,
        });
    }
  }

  /** True when flushed chains or sets wait for deletion. */
  get hasStale(): boolean {
    return this.#staleChains.size > 0 || this.#staleSets.size > 0 || this.#hairpins.hasStale;
  }

  #elementsOf(set: string): Map<string, ElementState> {
    let m = this.#elements.get(set);
    if (!m) {
      m = new Map();
      this.#elements.set(set, m);
    }
    return m;
  }

  /**
   * Plans the changes that take the table from what was applied to `state`; they are recorded
   * as applied by the time the plan's units are all taken. If applying the plan fails the mirror
   * is wrong: the caller must discard it and rebuild from a fresh listing.
   */
  plan(state: LocalState, now: number): Plan {
    const deletions = this.#expiredStale(now);
    const d: Draft = {
      skeleton: [],
      sets: [],
      leafChains: { specs: [], held: [] },
      entryChains: { specs: [], held: [] },
      touched: [],
      unshared: new Set(),
      staleFlushes: [],
    };
    if (this.#fresh) d.skeleton.push({ phase: PHASE.skeleton, ops: skeletonOps(this.#cfg), elements: [] });
    const ranges = state.serviceCIDRs[ipFamilyOfNft(this.#cfg.family)];
    if (this.#fresh || !equalRules(ranges, this.#serviceCIDRs)) {
      d.skeleton.push({ phase: PHASE.skeleton, ops: serviceCIDROps(ranges), elements: [] });
      this.#serviceCIDRs = ranges;
    }
    // A first plan visits services in key order, so the same state always renders the same text
    // whichever way it arrived (in-process or over the API, whose maps are built in other orders).
    const keys = this.#fresh ? [...state.services.keys()].sort() : changedServiceKeys(this.#applied, state);
    for (const key of keys) {
      const svc = state.services.get(key);
      const prev = this.#services.get(key);
      if (prev?.svc === svc) continue;
      if (svc === undefined) {
        this.#replace(key, prev!.fragment, EMPTY_FRAGMENT, d, now);
        this.#services.delete(key);
        continue;
      }
      const fragment = serviceFragment(svc, this.#cfg);
      this.#replace(key, prev?.fragment ?? EMPTY_FRAGMENT, fragment, d, now);
      this.#services.set(key, { svc, fragment });
    }
    this.#applied = state;
    // Only now: another service may have started using a chain that one stopped using.
    for (const name of d.unshared) if (!this.#sharedUsers.has(name)) this.#retireChain(name, d, now);
    if (this.#fresh) this.#retireUnclaimed(d, now);
    this.#fresh = false;
    return { deletions, units: this.#units(d, now) };
  }

  /** The draft's units in phase order, each built as it is taken. */
  *#units(d: Draft, now: number): Generator<Unit> {
    yield* d.skeleton;
    for (const s of d.sets) {
      const declaration: SetDeclaration = {
        key: { types: [addressType(this.#cfg.family)] },
        flags: ["dynamic", "timeout"],
        timeoutSeconds: s.timeoutSeconds,
      };
      yield {
        phase: PHASE.sets,
        ops: [{ verb: "add", kind: "set", name: s.name, declaration }],
        elements: [],
      };
    }
    yield* chainUnits(PHASE.leafChains, d.leafChains);
    yield* chainUnits(PHASE.entryChains, d.entryChains);
    // Endpoints first: a dispatch element never leads to a list that is not in the table yet.
    // Removals go last: when a big sync is split, no endpoint index disappears before the
    // dispatch element that draws from it has moved to a smaller pick chain.
    yield* elementUnits(PHASE.endpoints, this.#groups.changes());
    yield* elementUnits(PHASE.elements, this.#elementChanges(d.touched));
    yield* elementUnits(PHASE.elements, this.#hairpins.additions(now));
    yield* elementUnits(PHASE.removals, this.#elementRemovals(d.touched));
    yield* elementUnits(PHASE.removals, this.#groups.removals());
    for (const name of d.staleFlushes)
      yield { phase: PHASE.staleFlush, ops: [{ verb: "flush", kind: "chain", name }], elements: [] };
  }

  #expiredStale(now: number): NftOp[] {
    const out: NftOp[] = [];
    // At most one deletion transaction per delay period: under a steady stream of changes,
    // something expires at every sync, and a second nft run per sync would double its cost.
    if (now - this.#lastDeletion < STALE_DELETE_DELAY_MS) return out;
    // Sets after chains: the stale chains were the last rules that referred to them.
    const kinds = [
      ["chain", this.#staleChains, this.#chains],
      ["set", this.#staleSets, this.#sets],
    ] as const;
    for (const [kind, stale, objects] of kinds) {
      for (const name of stale) {
        const since = objects.get(name)?.staleSince;
        if (since !== undefined && now - since >= STALE_DELETE_DELAY_MS) {
          out.push({ verb: "delete", kind, name });
          objects.delete(name);
          stale.delete(name);
        }
      }
    }
    const expired = this.#hairpins.expired(now, STALE_DELETE_DELAY_MS);
    if (expired.length > 0)
      out.push({ verb: "delete", kind: "element", set: STATIC.hairpin, elements: expired });
    if (out.length > 0) this.#lastDeletion = now;
    return out;
  }

  #replace(owner: string, old: Fragment, next: Fragment, d: Draft, now: number): void {
    for (const s of next.affinitySets) {
      const st = this.#sets.get(s.name);
      if (st) {
        st.staleSince = undefined;
        this.#staleSets.delete(s.name);
      } else {
        this.#sets.set(s.name, { staleSince: undefined });
        d.sets.push(s);
      }
    }
    const nextSets = new Set(next.affinitySets.map((s) => s.name));
    for (const s of old.affinitySets) {
      const st = this.#sets.get(s.name);
      if (!nextSets.has(s.name) && st && st.staleSince === undefined) this.#markStaleSet(s.name, st, now);
    }
    for (const c of next.chains) this.#writeChain(c, d);
    const nextChains = new Set(next.chains.map((c) => c.name));
    for (const c of old.chains) {
      if (!nextChains.has(c.name)) this.#retireChain(c.name, d, now);
    }
    for (const c of next.sharedChains) {
      const users = this.#sharedUsers.get(c.name) ?? 0;
      this.#sharedUsers.set(c.name, users + 1);
      if (users === 0) this.#writeChain(c, d);
    }
    for (const c of old.sharedChains) {
      const users = (this.#sharedUsers.get(c.name) ?? 1) - 1;
      if (users > 0) this.#sharedUsers.set(c.name, users);
      else {
        this.#sharedUsers.delete(c.name);
        d.unshared.add(c.name);
      }
    }
    this.#groups.replace(owner, old.groups, next.groups);
    for (const ip of old.hairpins) this.#hairpins.release(ip);
    for (const ip of next.hairpins) this.#hairpins.use(ip);
    for (const e of old.elements) {
      const st = this.#elementsOf(e.set).get(e.key);
      if (st === undefined) continue;
      removeOwner(st, owner);
      touch(d.touched, st);
    }
    for (const e of next.elements) {
      const m = this.#elementsOf(e.set);
      let st = m.get(e.key);
      if (!st) {
        st = {
          set: e.set,
          key: e.key,
          applied: undefined,
          owner: undefined,
          value: undefined,
          others: undefined,
          touched: false,
        };
        m.set(e.key, st);
      }
      addOwner(st, owner, e.value);
      touch(d.touched, st);
    }
  }

  /** Creates a chain, or rewrites it when its applied rules differ or are unknown. */
  #writeChain(c: ChainSpec, d: Draft): void {
    const st = this.#chains.get(c.name);
    const writes = c.level === 0 ? d.leafChains : d.entryChains;
    if (!st) {
      writes.specs.push(c);
      writes.held.push(CHAIN_ABSENT);
    } else if (st.rules === undefined || st.staleSince !== undefined || !equalRules(st.rules, c.rules)) {
      writes.specs.push(c);
      writes.held.push(st.rules === undefined || st.rules.length > 0 ? CHAIN_FILLED : CHAIN_EMPTY);
    }
    this.#chains.set(c.name, { rules: c.rules, staleSince: undefined });
    this.#staleChains.delete(c.name);
  }

  #markStaleSet(name: string, st: { staleSince: number | undefined }, now: number): void {
    st.staleSince = now;
    this.#staleSets.add(name);
  }

  #retireChain(name: string, d: Draft, now: number): void {
    const st = this.#chains.get(name);
    if (!st || st.staleSince !== undefined) return;
    if (st.rules === undefined || st.rules.length > 0) d.staleFlushes.push(name);
    this.#chains.set(name, { rules: [], staleSince: now });
    this.#staleChains.add(name);
  }

  /** After adopting an existing table: what no service claimed is retired. */
  #retireUnclaimed(d: Draft, now: number): void {
    for (const [name, st] of this.#chains) if (st.rules === undefined) this.#retireChain(name, d, now);
    const claimed = new Set<string>();
    for (const { fragment } of this.#services.values())
      for (const s of fragment.affinitySets) claimed.add(s.name);
    for (const [name, st] of this.#sets)
      if (!claimed.has(name) && st.staleSince === undefined) this.#markStaleSet(name, st, now);
    for (const m of this.#elements.values()) {
      for (const st of m.values()) if (st.owner === undefined) touch(d.touched, st);
    }
    this.#groups.retireUnclaimed();
    this.#hairpins.retireUnclaimed(now);
  }

  /** Additions and replacements of the touched elements, recorded as applied as they are taken. */
  *#elementChanges(touched: readonly ElementState[]): Generator<ElementOp> {
    for (const st of touched) {
      const { set, key, applied } = st;
      const wanted = st.value;
      if (wanted === undefined || wanted === applied) continue;
      st.applied = wanted;
      if (applied !== undefined) yield { op: "delete", set, key, value: applied };
      yield { op: "add", set, key, value: wanted };
    }
  }

  /** Removals of the touched elements no service wants; forgets them as they are taken. */
  *#elementRemovals(touched: readonly ElementState[]): Generator<ElementOp> {
    for (const st of touched) {
      st.touched = false;
      if (st.value !== undefined) continue;
      const { set, key, applied } = st;
      this.#elementsOf(set).delete(key);
      if (applied !== undefined) yield { op: "delete", set, key, value: applied };
    }
  }
}

/** One unit per chain: created with its rules, or its rules replaced. */
function* chainUnits(phase: Phase, writes: ChainWrites): Generator<Unit> {
  for (let i = 0; i < writes.specs.length; i++) {
    const c = writes.specs[i]!;
    const held = writes.held[i]!;
    const ops: NftOp[] = [];
    if (held === CHAIN_ABSENT) ops.push({ verb: "add", kind: "chain", name: c.name });
    else if (held === CHAIN_FILLED) ops.push({ verb: "flush", kind: "chain", name: c.name });
    for (const rule of c.rules) ops.push({ verb: "add", kind: "rule", chain: c.name, rule });
    yield { phase, ops, elements: [] };
  }
}

/** Element ops in units of about ELEMENTS_PER_UNIT, never splitting a delete from its add. */
function* elementUnits(phase: Phase, ops: Iterable<ElementOp>): Generator<Unit> {
  let batch: ElementOp[] = [];
  for (const op of ops) {
    const last = batch.at(-1);
    // A replacement is a delete then an add of one key: keep the pair in one unit.
    const completes = last?.op === "delete" && op.key === last.key && op.set === last.set;
    if (batch.length >= ELEMENTS_PER_UNIT && !completes) {
      yield { phase, ops: [], elements: batch };
      batch = [];
    }
    batch.push(op);
  }
  if (batch.length > 0) yield { phase, ops: [], elements: batch };
}
