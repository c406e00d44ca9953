// Parts of validated objects that many objects hold alike (no annotations, no external IPs, the
// same ports), kept once. At 100k Services each copy is an object that lives as long as the store
// and that every collection copies or marks again. Shared values are frozen, and the model's
// types are readonly, so no holder can change what another one sees.

const EMPTY_LIST: readonly never[] = Object.freeze([]);
/** The one empty string map (mapOrEmpty). */
export const EMPTY_MAP: Readonly<Record<string, string>> = Object.freeze({});

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
 * Lists by a key that describes them exactly. The first `max` keys seen are kept and their lists
 * shared, frozen with their items; past that, lists are used as they are (a cluster of that many
 * distinct ones gains little from sharing, and the table stays bounded).
 */
export class SharedLists<T> {
  readonly #byKey = new Map<string, readonly T[]>();
  readonly #max: number;
  readonly #same: (a: T, b: T) => boolean;
  /**
   * The list the table last gave out: objects read one after another mostly hold the same list,
   * and a list the same item by item is that one without its key made and looked up.
   */
  #last: readonly T[] | undefined;

  /** `same` tells items apart by every field a key reads: items it finds the same have one key. */
  constructor(max: number, same: (a: T, b: T) => boolean) {
    this.#max = max;
    this.#same = same;
  }

  /** The list kept for `keyOf(list)`, else `list` (kept and frozen while there is room). */
  shared(list: T[], keyOf: (list: readonly T[]) => string): readonly T[] {
    const last = this.#last;
    if (last !== undefined && this.#sameItems(last, list)) return last;
    const key = keyOf(list);
    const known = this.#byKey.get(key);
    if (known !== undefined) {
      this.#last = known;
      return known;
    }
    if (this.#byKey.size >= this.#max) return list;
    for (const item of list) if (typeof item === "object" && item !== null) Object.freeze(item);
    Object.freeze(list);
    this.#byKey.set(key, list);
    this.#last = list;
    return list;
  }

  get size(): number {
    return this.#byKey.size;
  }

  #sameItems(a: readonly T[], b: readonly T[]): boolean {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!this.#same(a[i] as T, b[i] as T)) return false;
    return true;
  }
}

/**
 * Texts that many objects hold alike (the node an endpoint runs on, its zone), one copy each:
 * JSON.parse makes a string for every occurrence of all but the shortest texts, so a node name
 * such as "ip-10-0-1-23.ec2.internal" would be a million strings at 100k Services. The first
 * `max` distinct texts are kept; past that, texts are used as they are.
 */
export class SharedStrings {
  readonly #known = new Map<string, string>();
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  /** The copy kept of `text`, else `text` (kept while there is room). */
  shared(text: string): string {
    // Most endpoints name no zone: no lookup for the empty text, which V8 keeps once anyway.
    if (text.length === 0) return "";
    const known = this.#known.get(text);
    if (known !== undefined) return known;
    if (this.#known.size < this.#max) this.#known.set(text, text);
    return text;
  }

  get size(): number {
    return this.#known.size;
  }
}

/**
 * A text as a part of a key that names every field exactly: its length goes before it, so no
 * text can pose as several fields. null (an absent name) is "-", which no length starts with.
 */
export function keyPart(text: string | null): string {
  return text === null ? "-" : `${text.length}:${text}`;
}
