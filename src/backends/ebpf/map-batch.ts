// Entries on their way to one BPF map, packed as the batch syscalls read them. The buffers are
// made once per writer and reused by every write: a cold start of a million endpoints allocates
// nothing per entry, and one endpoint change allocates nothing per batch.

import { chunksOf, MAPS, writeChunkKey } from "./layout.ts";
import { BATCH, type LbMapName, type LbMaps } from "./maps.ts";
import { sharedBuffer } from "./update-thread.ts";

/** Keys and values of one batch, packed back to back. */
interface Buffers {
  readonly keys: Buffer;
  readonly values: Buffer;
}

/**
 * Inserts for one map, written with one batch syscall each time the buffers fill and at `flush`.
 * `first` is the batch that must reach the kernel before this one (the backend lists before the
 * frontends that name them): flushing this one flushes that one first. With maps that update in
 * the background, a batch that fills goes to the kernel on the maps' thread while the next one
 * is encoded into a second pair of buffers; `flush` writes the rest and waits for all of it.
 */
export class WriteBatch {
  readonly keySize: number;
  readonly valueSize: number;
  readonly #maps: LbMaps;
  readonly #map: LbMapName;
  readonly #first: WriteBatch | undefined;
  readonly #capacity: number;
  /** One pair, or two that take turns when the maps update in the background. */
  readonly #buffers: readonly Buffers[];
  #turn = 0;
  #count = 0;
  #flushed = 0;

  constructor(maps: LbMaps, map: LbMapName, first?: WriteBatch, capacity = BATCH) {
    this.#maps = maps;
    this.#map = map;
    this.#first = first;
    this.#capacity = capacity;
    this.keySize = MAPS[map].key;
    this.valueSize = MAPS[map].value;
    const pair = (alloc: (bytes: number) => Buffer): Buffers => ({
      keys: alloc(capacity * this.keySize),
      values: alloc(capacity * this.valueSize),
    });
    this.#buffers =
      maps.updateInBackground === undefined
        ? [pair(Buffer.allocUnsafe)]
        : [pair(sharedBuffer), pair(sharedBuffer)];
  }

  /** Where the pending entries' keys go: read it again after each next() or reserve(). */
  get keys(): Buffer {
    return (this.#buffers[this.#turn] as Buffers).keys;
  }

  /** Where the pending entries' values go: read it again after each next() or reserve(). */
  get values(): Buffer {
    return (this.#buffers[this.#turn] as Buffers).values;
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
    if (this.#count === this.#capacity) this.#write(true);
    return this.#count++;
  }

  /**
   * Room for `count` more entries, one after the other (count ≤ the capacity): the index of the
   * first. Writes what is pending first when they would not fit.
   */
  reserve(count: number): number {
    if (this.#count + count > this.#capacity) this.#write(true);
    const first = this.#count;
    this.#count += count;
    return first;
  }

  /** Writes what is pending (the `first` batch before it), and waits until the kernel has it all. */
  flush(): void {
    this.#first?.flush();
    this.#write(false);
    this.#maps.settle?.();
  }

  /** Hands the pending entries to the kernel; with `more` to come, in the background if it can. */
  #write(more: boolean): void {
    // The batch this one depends on goes first, in the order the kernel is to see them.
    if (more && this.#first !== undefined) this.#first.#write(true);
    if (this.#count === 0) return;
    const n = this.#count;
    const { keys, values } = this;
    // Counted as pending until the kernel took them: a failure leaves the count as it was.
    if (more && this.#maps.updateInBackground !== undefined) {
      this.#maps.updateInBackground(this.#map, keys, values, n);
      this.#turn = 1 - this.#turn;
    } else {
      this.#maps.update(this.#map, keys, values, n);
    }
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

  /** Adds the keys of backend list (id, gen): the chunks `count` backends take. */
  addList(id: number, gen: number, count: number): void {
    const chunks = chunksOf(count);
    for (let chunk = 0; chunk < chunks; chunk++) {
      const at = this.#next();
      writeChunkKey(this.#keys, at, id, gen, chunk);
    }
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
