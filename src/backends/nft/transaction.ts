// Turns planned changes into nft transactions. A change is a unit of statements that must be
// committed together (a chain with its rules, a map element replaced by delete+add). Units are
// packed in order into transactions of bounded size; since units are ordered so that an object
// is always created before anything refers to it, every committed transaction leaves a
// consistent table.

export type ElementOp = {
  readonly op: "add" | "delete";
  readonly set: string;
  readonly key: string;
  readonly value: string;
};

export interface Unit {
  /**
   * Order of application: skeleton, sets, leaf chains, entry chains, added or replaced elements,
   * removed elements, stale flushes.
   */
  readonly phase: Phase;
  readonly lines: readonly string[];
  readonly elements: readonly ElementOp[];
}

export const PHASE = {
  skeleton: 0,
  sets: 1,
  leafChains: 2,
  entryChains: 3,
  elements: 4,
  removals: 5,
  staleFlush: 6,
} as const;
export type Phase = (typeof PHASE)[keyof typeof PHASE];

export function unitSize(u: Unit): number {
  return u.lines.length + u.elements.length;
}

/** Packs units (already in phase order) into transactions of at most `limit` statements each. */
export function packTransactions(
  units: readonly Unit[],
  family: string,
  table: string,
  limit: number,
): string[] {
  const out: string[] = [];
  let chunk: Unit[] = [];
  let size = 0;
  for (const u of units) {
    const s = unitSize(u);
    if (chunk.length > 0 && size + s > limit) {
      out.push(renderTransaction(chunk, family, table));
      chunk = [];
      size = 0;
    }
    chunk.push(u);
    size += s;
  }
  if (chunk.length > 0) out.push(renderTransaction(chunk, family, table));
  return out;
}

/**
 * One transaction's text. Element operations are merged into one statement per map and verb
 * (nft parses `{ a, b, c }` far faster than one command per element); all deletions come before
 * all additions, so a delete+add pair replaces a value.
 */
export function renderTransaction(units: readonly Unit[], family: string, table: string): string {
  const lines: string[] = [];
  for (const u of units) if (u.phase < PHASE.elements) lines.push(...u.lines);
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
  for (const [set, keys] of deletes)
    lines.push(`delete element ${family} ${table} ${set} { ${keys.join(", ")} }`);
  for (const [set, keys] of adds) lines.push(`add element ${family} ${table} ${set} { ${keys.join(", ")} }`);
  for (const u of units) if (u.phase >= PHASE.elements) lines.push(...u.lines);
  return `${lines.join("\n")}\n`;
}
