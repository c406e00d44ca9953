// The map half of the eBPF runner: batch writes and reads of kpng's pinned maps. `LbMaps` is the
// interface the map writer uses (a fake in unit tests); `PinnedMaps` is the kernel's, through the
// libbpf binding of the `bpf` package (batch syscalls: a million entries in about a second).

import { join } from "node:path";
import { createMapRef, objGet, RawMap } from "bpf";
import { MAPS } from "./layout.ts";

type LbMapName = "services" | "backends";

export interface LbMaps {
  /** Inserts or replaces every entry, in order; throws a MapWriteError, having written a prefix. */
  update(map: LbMapName, entries: readonly (readonly [Buffer, Buffer])[]): void;
  /** Deletes the keys; keys already absent are fine. Throws a MapWriteError. */
  delete(map: LbMapName, keys: readonly Buffer[]): void;
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

/** Entries per batch syscall: bounded so one call never holds a huge buffer. */
const BATCH = 10_000;

export function mapPinPath(bpfRoot: string, map: keyof typeof MAPS): string {
  return join(bpfRoot, "kpng", "maps", MAPS[map].name);
}

export class PinnedMaps implements LbMaps {
  readonly #maps: Record<LbMapName, RawMap>;

  constructor(bpfRoot: string) {
    const open = (m: LbMapName) => {
      const fd = objGet(mapPinPath(bpfRoot, m));
      return new RawMap(createMapRef(fd, { transfer: true }));
    };
    this.#maps = { services: open("services"), backends: open("backends") };
  }

  update(map: LbMapName, entries: readonly (readonly [Buffer, Buffer])[]): void {
    const m = this.#maps[map];
    for (let i = 0; i < entries.length; i += BATCH) {
      const chunk = entries.slice(i, i + BATCH) as [Buffer, Buffer][];
      try {
        m.setBatch(chunk);
      } catch (err) {
        throw asWriteError(map, err);
      }
    }
  }

  delete(map: LbMapName, keys: readonly Buffer[]): void {
    const m = this.#maps[map];
    for (let i = 0; i < keys.length; i += BATCH) {
      const chunk = keys.slice(i, i + BATCH);
      try {
        m.deleteBatch(chunk);
      } catch (err) {
        // A batch stops at the first absent key: delete the rest one by one.
        if (errnoOf(err) !== ENOENT) throw asWriteError(map, err);
        for (const k of chunk) {
          try {
            m.delete(k);
          } catch (e) {
            if (errnoOf(e) !== ENOENT) throw asWriteError(map, e);
          }
        }
      }
    }
  }

  get(map: LbMapName, key: Buffer): Buffer | undefined {
    return this.#maps[map].get(key);
  }

  *entries(map: LbMapName): Iterable<[Buffer, Buffer]> {
    for (const batch of this.#maps[map].getBatch(BATCH)) yield* batch;
  }

  close(): void {
    // The RawMaps own their descriptors (transfer: true); they close when collected.
  }
}

function errnoOf(err: unknown): number | undefined {
  const e = err as { errno?: unknown };
  return typeof e?.errno === "number" ? e.errno : undefined;
}

function asWriteError(map: LbMapName, err: unknown): MapWriteError {
  return new MapWriteError(map, errnoOf(err) ?? 0, (err as Error).message ?? String(err));
}
