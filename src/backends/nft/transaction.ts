// Turns planned changes into nft transactions. A change is a unit of operations that must be
// committed together (a chain with its rules, a map element replaced by delete+add). Units are
// packed in order into transactions of bounded size; since units are ordered so that an object
// is always created before anything refers to it, every committed transaction leaves a
// consistent table.

import type { NftFamily } from "../../model/ip.ts";
import { type NftOp, type NftScript, renderScript } from "./ops.ts";

export type ElementOp = {
  readonly op: "add" | "delete";
  readonly set: string;
  readonly key: string;
  readonly value: string;
};

export interface Unit {
  /**
   * Order of application: skeleton, sets, leaf chains, entry chains, the endpoint maps' added or
   * replaced elements, the other added or replaced elements, removed elements, stale flushes.
   */
  readonly phase: Phase;
  /** Operations other than the element changes below, in order. */
  readonly ops: readonly NftOp[];
  readonly elements: readonly ElementOp[];
}

export const PHASE = {
  skeleton: 0,
  sets: 1,
  leafChains: 2,
  entryChains: 3,
  /**
   * Before the dispatch elements that lead to them, and applied to the end before any of those
   * starts: a restart fills the endpoint maps of a new generation before moving dispatch there.
   */
  endpoints: 4,
  elements: 5,
  removals: 6,
  staleFlush: 7,
} as const;
export type Phase = (typeof PHASE)[keyof typeof PHASE];

/** Phases whose transactions only add or replace elements. */
const COMMUTING: ReadonlySet<Phase> = new Set([PHASE.endpoints, PHASE.elements]);

/**
 * A transaction of a large sync. `commutesWithin` is its phase when it only adds or replaces
 * elements of that one phase: such transactions give the same table in any order, so
 * consecutive ones of a phase may be applied at once (and those of the next phase after them).
 */
export interface PackedTransaction extends NftScript {
  readonly commutesWithin: Phase | undefined;
}

function unitSize(u: Unit): number {
  return u.ops.length + u.elements.length;
}

/**
 * Packs units (already in phase order) into transactions of at most `limit` statements each,
 * taking the next unit and rendering a transaction only when asked for: a caller rendering the
 * next while nft applies the previous holds one or two transactions' units and text at a time,
 * whatever the size of the table.
 */
export function* packTransactions(
  units: Iterable<Unit>,
  family: NftFamily,
  table: string,
  limit: number,
): Generator<PackedTransaction> {
  let chunk: Unit[] = [];
  let size = 0;
  for (const u of units) {
    const s = unitSize(u);
    if (chunk.length > 0 && size + s > limit) {
      const script = packed(chunk, family, table);
      // Let go of the units before waiting: only the text is alive while nft applies it.
      chunk = [];
      size = 0;
      yield script;
    }
    chunk.push(u);
    size += s;
  }
  if (chunk.length > 0) yield packed(chunk, family, table);
}

function packed(units: readonly Unit[], family: NftFamily, table: string): PackedTransaction {
  return {
    ...renderTransaction(units, family, table),
    commutesWithin:
      units.every((u) => u.phase === units[0]!.phase) && COMMUTING.has(units[0]!.phase)
        ? units[0]!.phase
        : undefined,
  };
}

/**
 * One transaction. Element operations are merged into one statement per map and verb (nft
 * parses `{ a, b, c }` far faster than one command per element); all deletions come before all
 * additions, so a delete+add pair replaces a value.
 */
export function renderTransaction(units: readonly Unit[], family: NftFamily, table: string): NftScript {
  const ops: NftOp[] = [];
  for (const u of units) if (u.phase < PHASE.endpoints) ops.push(...u.ops);
  const deletes = new Map<string, string[]>();
  const adds = new Map<string, string[]>();
  for (const u of units) {
    for (const e of u.elements) {
      const target = e.op === "delete" ? deletes : adds;
      let list = target.get(e.set);
      if (!list) {
        list = [];
        target.set(e.set, list);
      }
      list.push(e.op === "add" && e.value !== "" ? `${e.key} : ${e.value}` : e.key);
    }
  }
  for (const [set, elements] of deletes) ops.push({ verb: "delete", kind: "element", set, elements });
  for (const [set, elements] of adds) ops.push({ verb: "add", kind: "element", set, elements });
  for (const u of units) if (u.phase >= PHASE.endpoints) ops.push(...u.ops);
  return renderScript(ops, family, table);
}
