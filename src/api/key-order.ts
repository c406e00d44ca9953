// A full state lists services in key order. Every node's services map holds (nearly always) the
// same keys, and a map with the same keys iterates them in the same order, so the sort is done
// once and reused: checking that a map's iteration order is the one remembered costs one pass
// of identity comparisons, where sorting 10k keys for each of 1,000 nodes cost seconds.

import { PersistentMap } from "../model/persistent-map.ts";

/** How many distinct key orders are remembered (nodes of one server nearly always share one). */
const REMEMBERED = 4;

interface Order {
  /** The keys as a map iterated them. */
  readonly iterated: readonly string[];
  /** For each key in iteration order, its position in sorted order. */
  readonly rank: Uint32Array;
}

function columnsOf<V>(map: ReadonlyMap<string, V>): { keys: string[]; values: V[] } {
  const keys: string[] = [];
  const values: V[] = [];
  // forEach, not entries(): no [key, value] pair per entry.
  map.forEach((v, k) => {
    keys.push(k);
    values.push(v);
  });
  return { keys, values };
}

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export class KeyOrder {
  #orders: Order[] = [];

  /** The map's values in ascending key order. */
  sortedValues<V>(map: ReadonlyMap<string, V>): V[] {
    const { keys, values } = map instanceof PersistentMap ? map.columns() : columnsOf(map);
    const order = this.#orderOf(keys);
    const out = new Array<V>(values.length);
    for (let i = 0; i < values.length; i++) out[order.rank[i]!] = values[i]!;
    return out;
  }

  #orderOf(keys: readonly string[]): Order {
    for (let o = 0; o < this.#orders.length; o++) {
      const order = this.#orders[o]!;
      if (sameSequence(order.iterated, keys)) {
        if (o > 0) this.#orders = [order, ...this.#orders.filter((x) => x !== order)];
        return order;
      }
    }
    const sorted = keys.map((_, i) => i).sort((a, b) => byString(keys[a]!, keys[b]!));
    const rank = new Uint32Array(keys.length);
    for (let s = 0; s < sorted.length; s++) rank[sorted[s]!] = s;
    const order = { iterated: keys, rank };
    this.#orders = [order, ...this.#orders.slice(0, REMEMBERED - 1)];
    return order;
  }
}

function sameSequence(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
