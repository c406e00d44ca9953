// Which services changed between two local states, in time proportional to the change. A
// producer of states (the brain's tracker, the API client's decoder) records the keys each
// revision changed in a ServiceChangeLog and hands the log along with every state; a consumer
// that holds the state it last applied asks for the keys changed since. When the log cannot
// answer (another producer, or revisions it no longer keeps) the answer comes from comparing
// the two maps, which costs O(services) but is always right.

import type { LocalService, LocalState } from "./local.ts";

interface ServiceChangeLogLimits {
  /** Most revisions remembered. */
  readonly maxRevisions?: number;
  /** Most keys remembered over all revisions. */
  readonly maxKeys?: number;
}

const NOTHING: ReadonlySet<string> = new Set();

/** The keys each revision of one producer changed (added, changed or removed), for a bounded past. */
export class ServiceChangeLog {
  readonly #maxRevisions: number;
  readonly #maxKeys: number;
  /** entries[i] holds the keys revision firstRevision + i changed. */
  #entries: ReadonlySet<string>[] = [];
  #firstRevision = 1;
  #keys = 0;

  constructor(limits: ServiceChangeLogLimits = {}) {
    this.#maxRevisions = limits.maxRevisions ?? 1024;
    this.#maxKeys = limits.maxKeys ?? 262_144;
  }

  /** The newest revision recorded (0 before the first). */
  get latest(): number {
    return this.#firstRevision + this.#entries.length - 1;
  }

  /** Records what `revision` changed; revisions are recorded in order, one by one. */
  record(revision: number, keys: ReadonlySet<string>): void {
    if (revision !== this.latest + 1) {
      // A gap: what came before can no longer be chained to what follows.
      this.#entries = [];
      this.#keys = 0;
      this.#firstRevision = revision;
    }
    this.#entries.push(keys);
    this.#keys += keys.size;
    let drop = 0;
    while (
      drop < this.#entries.length - 1 &&
      (this.#entries.length - drop > this.#maxRevisions || this.#keys > this.#maxKeys)
    ) {
      this.#keys -= this.#entries[drop]!.size;
      drop++;
    }
    if (drop > 0) {
      this.#entries = this.#entries.slice(drop);
      this.#firstRevision += drop;
    }
  }

  /**
   * The keys changed after revision `from` up to and including `to`; undefined when the log does
   * not hold all of those revisions. A key may be named although its value ended up the same.
   */
  between(from: number, to: number): ReadonlySet<string> | undefined {
    if (from === to) return NOTHING;
    if (from > to || from + 1 < this.#firstRevision || to > this.latest) return undefined;
    const first = from + 1 - this.#firstRevision;
    if (to === from + 1) return this.#entries[first];
    const out = new Set<string>();
    for (let i = first; i <= to - this.#firstRevision; i++) for (const key of this.#entries[i]!) out.add(key);
    return out;
  }
}

/**
 * The keys of the services that may differ between `before` (undefined: nothing applied yet)
 * and `after`: every key whose value is not the same object is in it, and maybe a few more.
 */
export function changedServiceKeys(before: LocalState | undefined, after: LocalState): Iterable<string> {
  if (before === undefined) return after.services.keys();
  if (before.services === after.services) return NOTHING;
  const log = after.changeLog;
  if (log !== undefined && log === before.changeLog) {
    const keys = log.between(before.revision, after.revision);
    if (keys !== undefined) return keys;
  }
  return comparedKeys(before.services, after.services);
}

/** The slow way: every key whose value is not the same object in both maps. */
function comparedKeys(
  before: ReadonlyMap<string, LocalService>,
  after: ReadonlyMap<string, LocalService>,
): Set<string> {
  const out = new Set<string>();
  for (const [key, s] of after) if (before.get(key) !== s) out.add(key);
  for (const key of before.keys()) if (!after.has(key)) out.add(key);
  return out;
}

/** Each changed key with its value before and after (undefined: absent); unchanged keys skipped. */
export function* serviceChanges(
  before: LocalState | undefined,
  after: LocalState,
): Generator<[key: string, before: LocalService | undefined, after: LocalService | undefined]> {
  if (before === undefined) {
    // Everything is new: the entries as they are, without a lookup per key (100k at a cold start).
    for (const [key, a] of after.services) yield [key, undefined, a];
    return;
  }
  const old = before.services;
  for (const key of changedServiceKeys(before, after)) {
    const b = old.get(key);
    const a = after.services.get(key);
    if (a !== b) yield [key, b, a];
  }
}
