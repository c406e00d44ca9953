// The map half of the eBPF runner: batch writes and reads of kpng's pinned maps. `LbMaps` is the
// interface the map writer uses (a fake in unit tests); `PinnedMaps` is the kernel's, through the
// libbpf binding of the `bpf` package (batch syscalls: a million entries in about a second).
// Writes take entries packed back to back in two buffers (keys, values), as the batch syscalls
// read them: no buffer per entry, no copy on the way to the kernel.

import { join } from "node:path";
import { getSystemErrorName } from "node:util";
import { createMapRef, objGet, RawMap } from "bpf";
import { native } from "bpf/dist/util.js";
import { MAPS } from "./layout.ts";
import { type UpdateOutcome, UpdateThread, UpdateThreadTimeout } from "./update-thread.ts";

export type LbMapName = "services" | "backends";

export interface LbMaps {
  /**
   * Inserts or replaces `count` entries, in order: `keys` and `values` hold them packed (the
   * map's key and value sizes each). Throws a MapWriteError, having written a prefix.
   */
  update(map: LbMapName, keys: Buffer, values: Buffer, count: number): void;
  /**
   * Optional: starts the same update on another thread and returns, so that the caller encodes
   * its next batch meanwhile. `keys` and `values` must be shared memory (sharedBuffer) and stay
   * untouched until the next call on these maps, which waits for the update first and throws its
   * MapWriteError. Present together with settle.
   */
  updateInBackground?(map: LbMapName, keys: Buffer, values: Buffer, count: number): void;
  /** Waits for the update in the background, if any; throws its MapWriteError. */
  settle?(): void;
  /** Deletes `count` keys packed in `keys`; keys already absent are fine. Throws a MapWriteError. */
  delete(map: LbMapName, keys: Buffer, count: number): void;
  /** One entry by its key; undefined when the map does not hold it. */
  get(map: LbMapName, key: Buffer): Buffer | undefined;
  /** Every entry the map holds. */
  entries(map: LbMapName): Iterable<[Buffer, Buffer]>;
  close(): void;
}

const ENOENT = 2;
const E2BIG = 7;
const ENOMEM = 12;
const ENOSPC = 28;

export class MapWriteError extends Error {
  readonly map: LbMapName;
  readonly errno: number;
  constructor(map: LbMapName, errno: number, message: string) {
    super(`writing BPF map ${MAPS[map].name}: ${message}`);
    this.name = "MapWriteError";
    this.map = map;
    this.errno = errno;
  }
  /** The map holds its maximum number of entries (--bpf-map-* too small). */
  get full(): boolean {
    return this.errno === E2BIG || this.errno === ENOSPC || this.errno === ENOMEM;
  }
}

/** Entries per batch syscall: large enough that the syscalls' own cost vanishes, bounded for reads. */
export const BATCH = 16_384;

export function mapPinPath(bpfRoot: string, map: keyof typeof MAPS): string {
  return join(bpfRoot, "kpng", "maps", MAPS[map].name);
}

const NO_FLAGS = { elemFlags: 0 };

/**
 * The key and value sizes and the size (most entries) of the map pinned at `path`; undefined when
 * nothing readable is pinned there.
 */
export function pinnedMapLayout(
  path: string,
): { keySize: number; valueSize: number; maxEntries: number } | undefined {
  let ref: ReturnType<typeof createMapRef> | undefined;
  try {
    ref = createMapRef(objGet(path), { transfer: true });
    return { keySize: ref.keySize, valueSize: ref.valueSize, maxEntries: ref.maxEntries };
  } catch {
    return undefined;
  } finally {
    ref?.close();
  }
}

export class PinnedMaps implements LbMaps {
  readonly #maps: Record<LbMapName, RawMap>;
  readonly #thread: UpdateThread;
  /** The map of the update in the background, for its error. */
  #inBackground: LbMapName | undefined;

  constructor(bpfRoot: string, thread: UpdateThread = new UpdateThread()) {
    const open = (m: LbMapName) => {
      const fd = objGet(mapPinPath(bpfRoot, m));
      return new RawMap(createMapRef(fd, { transfer: true }));
    };
    this.#maps = { services: open("services"), backends: open("backends") };
    this.#thread = thread;
  }

  updateInBackground(map: LbMapName, keys: Buffer, values: Buffer, count: number): void {
    if (count > BATCH) throw new RangeError(`a background update takes at most ${BATCH} entries`);
    this.settle();
    const { key, value } = MAPS[map];
    this.#thread.submit(this.#maps[map].ref.fd, keys, values, key, value, count);
    this.#inBackground = map;
  }

  settle(): void {
    const map = this.#inBackground;
    if (map === undefined) return;
    this.#inBackground = undefined;
    let outcome: UpdateOutcome | undefined;
    try {
      outcome = this.#thread.settle();
    } catch (err) {
      if (err instanceof UpdateThreadTimeout) throw new MapWriteError(map, 0, err.message);
      throw err;
    }
    if (outcome === undefined) return;
    if (outcome.result < 0) throw syscallError(map, -outcome.result, `update of ${outcome.count} entries`);
    if (outcome.written !== outcome.count)
      throw new MapWriteError(map, 0, `${outcome.written} of ${outcome.count} entries written`);
  }

  update(map: LbMapName, keys: Buffer, values: Buffer, count: number): void {
    this.settle();
    const { key, value } = MAPS[map];
    const fd = this.#maps[map].ref.fd;
    for (let i = 0; i < count; i += BATCH) {
      const n = Math.min(BATCH, count - i);
      const [status, done] = native.mapUpdateBatch(
        fd,
        keys.subarray(i * key, (i + n) * key),
        values.subarray(i * value, (i + n) * value),
        n,
        NO_FLAGS,
      ) as [number, number];
      if (status < 0) throw syscallError(map, -status, `update of ${n} entries`);
      if (done !== n) throw new MapWriteError(map, 0, `${done} of ${n} entries written`);
    }
  }

  delete(map: LbMapName, keys: Buffer, count: number): void {
    this.settle();
    const { key } = MAPS[map];
    const m = this.#maps[map];
    for (let i = 0; i < count; i += BATCH) {
      const n = Math.min(BATCH, count - i);
      const chunk = keys.subarray(i * key, (i + n) * key);
      const [status] = native.mapDeleteBatch(m.ref.fd, chunk, n, NO_FLAGS) as [number, number];
      if (status >= 0) continue;
      // A batch stops at the first absent key: delete the rest one by one.
      if (-status !== ENOENT) throw syscallError(map, -status, `delete of ${n} keys`);
      for (let k = 0; k < n; k++) {
        try {
          m.delete(chunk.subarray(k * key, (k + 1) * key));
        } catch (e) {
          if (errnoOf(e) !== ENOENT) throw asWriteError(map, e);
        }
      }
    }
  }

  get(map: LbMapName, key: Buffer): Buffer | undefined {
    this.settle();
    return this.#maps[map].get(key);
  }

  *entries(map: LbMapName): Iterable<[Buffer, Buffer]> {
    this.settle();
    for (const batch of this.#maps[map].getBatch(BATCH)) yield* batch;
  }

  close(): void {
    // The RawMaps own their descriptors (transfer: true); they close when collected. An update
    // still in the background finishes first: the thread holds the descriptor's number.
    this.#inBackground = undefined;
    this.#thread.close();
  }
}

function errnoOf(err: unknown): number | undefined {
  const e = err as { errno?: unknown };
  return typeof e?.errno === "number" ? e.errno : undefined;
}

function syscallError(map: LbMapName, errno: number, what: string): MapWriteError {
  return new MapWriteError(map, errno, `${what}: ${getSystemErrorName(-errno)}`);
}

function asWriteError(map: LbMapName, err: unknown): MapWriteError {
  return new MapWriteError(map, errnoOf(err) ?? 0, (err as Error).message ?? String(err));
}
