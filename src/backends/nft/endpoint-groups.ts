// The endpoint lists of the endpoints maps, tracked one list per service port instead of one
// element per endpoint. A service port's endpoints are the elements `<prefix><i> : <endpoint>`
// for i = 0..n-1 (the pick chain draws i at random); they always change together, so keeping
// them as one group costs one map lookup per port, not one per endpoint, which at a million
// endpoints is most of a cold start's bookkeeping. When two services claim one prefix (a cluster
// IP reused before the old service is gone), the first one's list wins whole.

import type { ElementGroupSpec } from "./fragment.ts";
import type { ElementOp } from "./transaction.ts";

interface GroupState {
  readonly set: string;
  readonly prefix: string;
  /** The values in the table, by index (the owner's list itself once applied); a hole is an index not in the table. */
  applied: readonly (string | undefined)[];
  owner: string | undefined;
  values: readonly string[] | undefined;
  others: Map<string, readonly string[]> | undefined;
  /** On the touched list that ops() reads. */
  touched: boolean;
}

/** Splits `<prefix><i>` into its prefix and index; undefined when the key does not end in an index. */
function splitKey(key: string): [string, number] | undefined {
  const at = key.lastIndexOf(" . ");
  if (at < 0) return undefined;
  const index = Number(key.slice(at + 3));
  return Number.isInteger(index) && index >= 0 ? [key.slice(0, at + 3), index] : undefined;
}

/**
 * The endpoints in the slots they will take: an endpoint already in the table keeps its index
 * when the list is not shorter than that, and new ones take the free indices. The pick chain
 * draws an index uniformly, so the order is free; keeping it makes replacing one endpoint (a pod
 * moved, a new IP sorting elsewhere) one element change instead of a shifted list.
 */
export function stablePlaces(
  applied: readonly (string | undefined)[],
  wanted: readonly string[],
): readonly string[] {
  if (applied.length === 0 || sameList(applied, wanted)) return wanted;
  const n = wanted.length;
  const slots: (string | undefined)[] = new Array(n);
  const was = new Map<string, number>();
  for (let i = 0; i < applied.length; i++) {
    const v = applied[i];
    if (v !== undefined) was.set(v, i);
  }
  const unplaced: string[] = [];
  for (const v of wanted) {
    const j = was.get(v);
    if (j !== undefined && j < n && slots[j] === undefined) slots[j] = v;
    else unplaced.push(v);
  }
  let next = 0;
  for (let i = 0; i < n; i++) if (slots[i] === undefined) slots[i] = unplaced[next++];
  return slots as string[];
}

function sameList(a: readonly (string | undefined)[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

export class EndpointGroups {
  /** set → prefix → group */
  readonly #groups = new Map<string, Map<string, GroupState>>();
  readonly #touched: GroupState[] = [];
  /** The groups `changes()` left with elements to remove, and what they held before. */
  readonly #removing: { readonly st: GroupState; readonly had: readonly (string | undefined)[] }[] = [];

  /** Adopts the elements an existing table holds in the group sets. */
  constructor(adopted: ReadonlyMap<string, ReadonlyMap<string, string>> = new Map()) {
    for (const [set, elements] of adopted) {
      for (const [key, value] of elements) {
        const split = splitKey(key);
        if (split === undefined) continue;
        const group = this.#group(set, split[0]);
        const applied = [...group.applied];
        applied[split[1]] = value;
        group.applied = applied;
      }
    }
  }

  /** One service's groups change from `old` to `next`. */
  replace(owner: string, old: readonly ElementGroupSpec[], next: readonly ElementGroupSpec[]): void {
    for (const g of old) {
      const st = this.#groups.get(g.set)?.get(g.prefix);
      if (st === undefined) continue;
      if (st.owner === owner) {
        const promoted = st.others?.entries().next().value;
        st.owner = promoted?.[0];
        st.values = promoted?.[1];
        if (promoted !== undefined) st.others!.delete(promoted[0]);
      } else st.others?.delete(owner);
      this.#touch(st);
    }
    for (const g of next) {
      const st = this.#group(g.set, g.prefix);
      if (st.owner === undefined) {
        st.owner = owner;
        st.values = g.values;
      } else if (st.owner !== owner && !st.others?.has(owner)) {
        st.others ??= new Map();
        st.others.set(owner, g.values);
      }
      this.#touch(st);
    }
  }

  /** After adoption: lists no service claimed are removed. */
  retireUnclaimed(): void {
    for (const m of this.#groups.values())
      for (const st of m.values()) if (st.owner === undefined) this.#touch(st);
  }

  /**
   * The element changes the touched groups need, replacements and additions, built as they are
   * taken; records them as applied. Removals come from `removals()` afterwards (applied last,
   * after the dispatch elements moved to the smaller pick chains).
   */
  *changes(): Generator<ElementOp> {
    for (const st of this.#touched) {
      st.touched = false;
      const { set, prefix, applied } = st;
      const wanted = stablePlaces(applied, st.values ?? []);
      let removes = false;
      for (let i = 0; i < wanted.length; i++) {
        const want = wanted[i];
        const had = applied[i];
        if (want === had) continue;
        if (want === undefined) {
          removes = true;
          continue;
        }
        const key = `${prefix}${i}`;
        if (had !== undefined) yield { op: "delete", set, key, value: had };
        yield { op: "add", set, key, value: want };
      }
      if (removes || applied.length > wanted.length) this.#removing.push({ st, had: applied });
      st.applied = wanted;
      if (st.owner === undefined) this.#groups.get(set)?.delete(prefix);
    }
    this.#touched.length = 0;
  }

  /** The removals the groups of the last `changes()` need, built as they are taken. */
  *removals(): Generator<ElementOp> {
    for (const { st, had } of this.#removing) {
      const { set, prefix, applied: wanted } = st;
      for (let i = 0; i < had.length; i++) {
        const value = had[i];
        if (value !== undefined && wanted[i] === undefined)
          yield { op: "delete", set, key: `${prefix}${i}`, value };
      }
    }
    this.#removing.length = 0;
  }

  #touch(st: GroupState): void {
    if (st.touched) return;
    st.touched = true;
    this.#touched.push(st);
  }

  #group(set: string, prefix: string): GroupState {
    let m = this.#groups.get(set);
    if (m === undefined) {
      m = new Map();
      this.#groups.set(set, m);
    }
    let st = m.get(prefix);
    if (st === undefined) {
      st = {
        set,
        prefix,
        applied: [],
        owner: undefined,
        values: undefined,
        others: undefined,
        touched: false,
      };
      m.set(prefix, st);
    }
    return st;
  }
}
