// A cache bounded by two generations: entries go into the newer; when it is full it becomes the
// older and the oldest is dropped. An entry read from the older moves to the newer, so what is
// still used stays cached without a per-entry order to keep.

export class TwoGenerations<V> {
  readonly #perGeneration: number;
  #newer = new Map<string, V>();
  #older = new Map<string, V>();

  constructor(perGeneration: number) {
    this.#perGeneration = perGeneration;
  }

  get(key: string): V | undefined {
    const value = this.#newer.get(key);
    if (value !== undefined) return value;
    const old = this.#older.get(key);
    if (old !== undefined) this.set(key, old);
    return old;
  }

  set(key: string, value: V): void {
    if (!this.#newer.has(key) && this.#newer.size >= this.#perGeneration) {
      this.#older = this.#newer;
      this.#newer = new Map();
    }
    this.#newer.set(key, value);
  }
}
