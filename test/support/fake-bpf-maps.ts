// In-memory BPF hash maps behind the eBPF backend's map interface. Like the kernel's: a map has a
// maximum number of entries (a write past it fails with E2BIG, having written what fit), a batch
// (keys and values packed, as the syscall takes them) is applied entry by entry, and a test can
// make the next writes fail.

import { MAPS } from "../../src/backends/ebpf/layout.ts";
import { type LbMaps, MapWriteError } from "../../src/backends/ebpf/maps.ts";

type Name = "services" | "backends";
const E2BIG = 7;

export class FakeBpfMaps implements LbMaps {
  readonly maps: Record<Name, Map<string, Buffer>> = { services: new Map(), backends: new Map() };
  readonly capacity: Record<Name, number>;
  /** Every call, in order: `update services 3`, `delete backends 2`. */
  readonly calls: string[] = [];
  /** The next write of this many entries fails (EIO) after writing none. */
  failNextWrites = 0;

  constructor(capacity: Partial<Record<Name, number>> = {}) {
    this.capacity = { services: capacity.services ?? 1_000_000, backends: capacity.backends ?? 1_000_000 };
  }

  update(map: Name, keys: Buffer, values: Buffer, count: number): void {
    if (count === 0) return;
    this.calls.push(`update ${map} ${count}`);
    if (this.failNextWrites > 0) {
      this.failNextWrites--;
      throw new MapWriteError(map, 5, "Input/output error");
    }
    const { key, value } = MAPS[map];
    const m = this.maps[map];
    for (let i = 0; i < count; i++) {
      const hex = keys.toString("hex", i * key, (i + 1) * key);
      if (!m.has(hex) && m.size >= this.capacity[map]) throw new MapWriteError(map, E2BIG, "map full");
      m.set(hex, Buffer.from(values.subarray(i * value, (i + 1) * value)));
    }
  }

  delete(map: Name, keys: Buffer, count: number): void {
    if (count === 0) return;
    this.calls.push(`delete ${map} ${count}`);
    const { key } = MAPS[map];
    for (let i = 0; i < count; i++) this.maps[map].delete(keys.toString("hex", i * key, (i + 1) * key));
  }

  get(map: Name, key: Buffer): Buffer | undefined {
    const v = this.maps[map].get(key.toString("hex"));
    return v === undefined ? undefined : Buffer.from(v);
  }

  *entries(map: Name): Iterable<[Buffer, Buffer]> {
    for (const [k, v] of [...this.maps[map]]) yield [Buffer.from(k, "hex"), Buffer.from(v)];
  }

  close(): void {}
}

/**
 * Fake maps that update in the background, as PinnedMaps does on its thread: an update given to
 * updateInBackground is applied only at the next call, from the caller's buffers as they are
 * then (a writer that touched them meanwhile writes wrong entries), and its failure is thrown by
 * that call.
 */
export class BackgroundFakeBpfMaps extends FakeBpfMaps {
  #pending: { map: Name; keys: Buffer; values: Buffer; count: number } | undefined;

  updateInBackground(map: Name, keys: Buffer, values: Buffer, count: number): void {
    if (!(keys.buffer instanceof SharedArrayBuffer) || !(values.buffer instanceof SharedArrayBuffer))
      throw new TypeError("a background update needs shared memory");
    this.settle();
    this.calls.push(`in background: ${map} ${count}`);
    this.#pending = { map, keys, values, count };
  }

  settle(): void {
    const p = this.#pending;
    this.#pending = undefined;
    if (p !== undefined) super.update(p.map, p.keys, p.values, p.count);
  }

  override update(map: Name, keys: Buffer, values: Buffer, count: number): void {
    this.settle();
    super.update(map, keys, values, count);
  }

  override delete(map: Name, keys: Buffer, count: number): void {
    this.settle();
    super.delete(map, keys, count);
  }

  override get(map: Name, key: Buffer): Buffer | undefined {
    this.settle();
    return super.get(map, key);
  }

  override *entries(map: Name): Iterable<[Buffer, Buffer]> {
    this.settle();
    yield* super.entries(map);
  }
}
