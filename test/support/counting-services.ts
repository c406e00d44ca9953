// A local state's services as a map that counts its walks and its lookups: a test shows with it
// that a step looks only at what changed (a walk of every Service costs O(n) at 100k).

import type { LocalService, LocalState } from "../../src/model/local.ts";

export interface ServiceReads {
  /** Iterations over every Service (keys, values, entries, forEach). */
  walks: number;
  /** get and has. */
  lookups: number;
}

export class CountingServices implements ReadonlyMap<string, LocalService> {
  readonly #inner: ReadonlyMap<string, LocalService>;
  readonly #reads: ServiceReads;
  constructor(inner: ReadonlyMap<string, LocalService>, reads: ServiceReads) {
    this.#inner = inner;
    this.#reads = reads;
  }
  get size(): number {
    return this.#inner.size;
  }
  get(key: string): LocalService | undefined {
    this.#reads.lookups++;
    return this.#inner.get(key);
  }
  has(key: string): boolean {
    this.#reads.lookups++;
    return this.#inner.has(key);
  }
  forEach(fn: (value: LocalService, key: string, map: ReadonlyMap<string, LocalService>) => void): void {
    this.#reads.walks++;
    for (const [k, v] of this.#inner) fn(v, k, this);
  }
  keys(): MapIterator<string> {
    this.#reads.walks++;
    return this.#inner.keys();
  }
  values(): MapIterator<LocalService> {
    this.#reads.walks++;
    return this.#inner.values();
  }
  entries(): MapIterator<[string, LocalService]> {
    this.#reads.walks++;
    return this.#inner.entries();
  }
  [Symbol.iterator](): MapIterator<[string, LocalService]> {
    return this.entries();
  }
}

/** `state` with its services counted into `reads`. */
export function countedState(state: LocalState, reads: ServiceReads): LocalState {
  return { ...state, services: new CountingServices(state.services, reads) };
}
