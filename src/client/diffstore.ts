// A generic diff store (KEP-2104's DiffStore): write the whole desired state each round, then
// ask what was created, updated or deleted since the previous round.
//
//   store.reset();                       // start a round
//   store.get("a").push("rule text");     // fill leaves (get creates a missing key)
//   store.done();                         // fingerprint what was written
//   store.changed(); store.deleted();     // the difference from the previous round

interface DiffItem<K, V> {
  readonly key: K;
  readonly value: V;
  /** Written this round and absent in the previous one. */
  readonly created: boolean;
}

interface Slot<V> {
  value: V;
  touched: boolean;
  previous: string | undefined;
  current: string | undefined;
}

export class DiffStore<K, V> {
  readonly #create: () => V;
  readonly #fingerprint: (value: V) => string;
  readonly #slots = new Map<K, Slot<V>>();
  #done = false;

  /** `create` makes an empty leaf; `fingerprint` decides whether two leaves are the same. */
  constructor(create: () => V, fingerprint: (value: V) => string = (v) => JSON.stringify(v)) {
    this.#create = create;
    this.#fingerprint = fingerprint;
  }

  /** The leaf for a key, created empty if missing; marks the key as present this round. */
  get(key: K): V {
    let slot = this.#slots.get(key);
    if (slot === undefined) {
      slot = { value: this.#create(), touched: false, previous: undefined, current: undefined };
      this.#slots.set(key, slot);
    }
    if (!slot.touched) {
      slot.touched = true;
      slot.value = this.#create();
    }
    this.#done = false;
    return slot.value;
  }

  has(key: K): boolean {
    return this.#slots.get(key)?.touched === true;
  }

  /** Ends the round's writes; changed() and deleted() need it. */
  done(): void {
    for (const slot of this.#slots.values())
      slot.current = slot.touched ? this.#fingerprint(slot.value) : undefined;
    this.#done = true;
  }

  /** Keys created or whose leaf differs from the previous round. */
  changed(): DiffItem<K, V>[] {
    this.#requireDone();
    const out: DiffItem<K, V>[] = [];
    for (const [key, slot] of this.#slots) {
      if (slot.touched && slot.current !== slot.previous) {
        out.push({ key, value: slot.value, created: slot.previous === undefined });
      }
    }
    return out;
  }

  /** Keys present in the previous round and not written in this one. */
  deleted(): K[] {
    this.#requireDone();
    const out: K[] = [];
    for (const [key, slot] of this.#slots) if (!slot.touched && slot.previous !== undefined) out.push(key);
    return out;
  }

  /** Starts a new round: what was written becomes the previous round; deleted keys are forgotten. */
  reset(): void {
    if (!this.#done) this.done();
    for (const [key, slot] of this.#slots) {
      if (!slot.touched) {
        this.#slots.delete(key);
        continue;
      }
      slot.previous = slot.current;
      slot.current = undefined;
      slot.touched = false;
    }
    this.#done = false;
  }

  #requireDone(): void {
    if (!this.#done) throw new Error("DiffStore: call done() before reading the difference");
  }
}
