// Entries on their way to one BPF map, packed as the batch syscalls read them. The buffers are
// made once per writer and reused by every write: a cold start of a million slots allocates
// nothing per entry, and one endpoint change allocates nothing per batch.

import { MAPS, writeSlot } from "./layout.ts";
import { BATCH, type LbMapName, type LbMaps } from "./maps.ts";

/**
 * Inserts for one map, written with one batch syscall each time the buffers fill and at `flush`.
 * `first` is the batch that must reach the kernel before this one (the backend slots before the
 * frontends that name them): flushing this one flushes that one first.
 */
export class WriteBatch {
  readonly keys: Buffer;
  readonly values: Buffer;
  readonly keySize: number;
  readonly valueSize: number;
  readonly #maps: LbMaps;
  readonly #map: LbMapName;
  readonly #first: WriteBatch | undefined;
  readonly #capacity: number;
  #count = 0;
  #flushed = 0;

  constructor(maps: LbMaps, map: LbMapName, first?: WriteBatch, capacity = BATCH) {
    this.#maps = maps;
    this.#map = map;
    this.#first = first;
    this.#capacity = capacity;
    this.keySize = MAPS[map].key;
    this.valueSize = MAPS[map].value;
    this.keys = Buffer.allocUnsafe(capacity * this.keySize);
    this.values = Buffer.allocUnsafe(capacity * this.valueSize);
  }

  /** Entries added since the last reset (written or still pending). */
  get added(): number {
    return this.#flushed + this.#count;
  }

  /** Forgets what is pending (a write that failed half-way) and the count. */
  reset(): void {
    this.#count = 0;
    this.#flushed = 0;
  }

  /**
   * Room for one more entry: its index in the buffers (key at index × keySize, value at
   * index × valueSize). Writes what is pending first when the buffers are full.
   */
  next(): number {
    if (this.#count === this.#capacity) this.flush();
    return this.#count++;
  }

  /**
   * Room for `count` more entries, one after the other (count ≤ the capacity): the index of the
   * first. Writes what is pending first when they would not fit.
   */
  reserve(count: number): number {
    if (this.#count + count > this.#capacity) this.flush();
    const first = this.#count;
    this.#count += count;
    return first;
  }

  /** Writes what is pending (the `first` batch before it). */
  flush(): void {
    this.#first?.flush();
    if (this.#count === 0) return;
    const n = this.#count;
    // Counted as pending until the kernel took them: a failure leaves the count as it was.
    this.#maps.update(this.#map, this.keys, this.values, n);
    this.#count = 0;
    this.#flushed += n;
  }
}

/** Keys to delete from one map, packed into a buffer that grows as needed. */
export class DeleteList {
  readonly keySize: number;
  #keys: Buffer;
  #count = 0;

  constructor(keySize: number, initial = 64) {
    this.keySize = keySize;
    this.#keys = Buffer.allocUnsafe(initial * keySize);
  }

  get count(): number {
    return this.#count;
  }

  /** Room for one more key: the offset to write it at (in the buffer as it is after this call). */
  #next(): number {
    if ((this.#count + 1) * this.keySize > this.#keys.length) {
      const grown = Buffer.allocUnsafe(this.#keys.length * 2);
      this.#keys.copy(grown, 0, 0, this.#count * this.keySize);
      this.#keys = grown;
    }
    return this.#count++ * this.keySize;
  }

  /** Adds a backend slot's key. */
  addSlot(id: number, gen: number, index: number): void {
    const at = this.#next();
    writeSlot(this.#keys, at, id, gen, index);
  }

  /** Adds a key given as a string of one byte per character. */
  addString(key: string): void {
    const at = this.#next();
    this.#keys.write(key, at, this.keySize, "latin1");
  }

  deleteFrom(maps: LbMaps, map: LbMapName): void {
    if (this.#count > 0) maps.delete(map, this.#keys, this.#count);
  }
}
