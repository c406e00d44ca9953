// Parts of validated objects that many objects hold alike (no annotations, no external IPs, the
// same ports), kept once. At 100k Services each copy is an object that lives as long as the store
// and that every collection copies or marks again. Shared values are frozen, and the model's
// types are readonly, so no holder can change what another one sees.

const EMPTY_LIST: readonly never[] = Object.freeze([]);
const EMPTY_MAP: Readonly<Record<string, string>> = Object.freeze({});

/** The list itself, or one shared empty list. */
export function listOrEmpty<T>(list: readonly T[]): readonly T[] {
  return list.length === 0 ? EMPTY_LIST : list;
}

/** The map itself, or one shared empty map. */
export function mapOrEmpty(map: Readonly<Record<string, string>>): Readonly<Record<string, string>> {
  for (const _ in map) return map;
  return EMPTY_MAP;
}

/**
 * Values by a key that describes them exactly. The first `max` keys seen are kept and their
 * values shared; past that, values are used as they are (a cluster of that many distinct ones
 * gains little from sharing, and the table stays bounded).
 */
export class SharedValues<T extends object> {
  readonly #byKey = new Map<string, T>();
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  /** The value kept for `key`, else `value` (kept, and frozen with `freeze`, while there is room). */
  shared(key: string, value: T, freeze: (value: T) => T = Object.freeze): T {
    const known = this.#byKey.get(key);
    if (known !== undefined) return known;
    if (this.#byKey.size >= this.#max) return value;
    const kept = freeze(value);
    this.#byKey.set(key, kept);
    return kept;
  }

  get size(): number {
    return this.#byKey.size;
  }
}

/** A list frozen together with its items. */
export function frozenList<T extends object>(list: T[]): T[] {
  for (const item of list) Object.freeze(item);
  return Object.freeze(list) as T[];
}
