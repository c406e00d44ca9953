// The map writer: brings the maps in line with the rendered Services, writing only what changed.
// A Service switches to a new backend list in one step: the new list goes into fresh chunks
// (id, gen+1, c) first, then each frontend's value is replaced by one that names the new list,
// and only then are the old chunks deleted. A connect therefore sees the old list or the new one,
// never half of either (the program re-reads the frontend if its chunk vanished in between).
// Entries are encoded straight into reused batch buffers (map-batch.ts); the lists' batch always
// reaches the kernel before the frontends' batch that names them.
//
// A full sync (the first one, or after a failure or a repair) starts by reading what the maps
// hold, so a restarted kpng adopts the pinned maps: entries that are already right stay, and
// Services keep resolving throughout.
//
// A writer may own one IP family of the maps (the backend syncs and times each family on its
// own): it reads, adopts and deletes only that family's frontends and lists, and gives its lists
// ids from its own half of the id space, above every id the maps held when it read them, so two
// writers on the same maps never name the same list.

import {
  BACKEND_BYTES,
  BACKEND_FAMILY,
  chunkBackends,
  chunksOf,
  decodeChunkKey,
  decodeServiceValue,
  type Frontend,
  listName,
  MAPS,
  type ServiceValue,
  SVC_REJECT,
  writeBackend,
  writeChunkKey,
  writeFrontend,
  writeServiceValue,
} from "./layout.ts";
import { DeleteList, WriteBatch } from "./map-batch.ts";
import type { LbMaps } from "./maps.ts";
import type { RenderedGroup } from "./render.ts";

const FRONTEND = MAPS.services.key;
const VALUE = MAPS.services.value;
const CHUNK_KEY = MAPS.backends.key;
const CHUNK = MAPS.backends.value;
const BACKEND = BACKEND_BYTES;
const EMPTY = Buffer.alloc(0);

/** One group as the maps hold it: its frontends' keys and its backend list, packed. */
interface Programmed {
  readonly name: string;
  readonly id: number;
  readonly gen: number;
  /** The frontends' keys, FRONTEND bytes each. */
  readonly frontends: Buffer;
  /** The backend list in order, BACKEND bytes each. */
  readonly backends: Buffer;
  readonly reject: boolean;
  readonly affinitySeconds: number;
}

/** What one write did, for logs, metrics and tests. */
export interface WriteReport {
  readonly services: number;
  readonly frontendsWritten: number;
  readonly frontendsDeleted: number;
  /** Entries of the backends map: chunks of up to BACKENDS_PER_CHUNK backends. */
  readonly backendsWritten: number;
  readonly backendsDeleted: number;
}

/** What the maps held of one family (or all) when they were read: frontends by key, and each list. */
export interface Adopted {
  readonly byFrontend: Map<string, ServiceValue>;
  readonly frontends: Map<number, Buffer[]>;
  /** Each list ("id/gen") by its backends' indices (BACKEND bytes each; holes where a chunk is missing). */
  readonly lists: Map<string, Buffer[]>;
  readonly claimed: Set<number>;
  /** The highest id in the scope's range that any entry held (0 when none). */
  lastId: number;
}

/** Which entries a writer owns: one address family, or every entry. */
type WriterScope = 4 | 6 | "all";

/** A key as a Map or Set key: one byte per character. */
const keyString = (packed: Buffer, at: number, size: number) => packed.toString("latin1", at, at + size);

/** The address family byte of a frontend's key (layout.ts). */
const KEY_FAMILY = 19;

/** The ids of each family's backend lists: IPv4 in the lower half, IPv6 in the upper. */
const ID_RANGES = {
  all: { first: 1, last: 0xffff_ffff },
  4: { first: 1, last: 0x7fff_ffff },
  6: { first: 0x8000_0000, last: 0xffff_ffff },
} as const;

interface MapWriterOptions {
  /** The one address family (4 or 6) this writer owns; every entry when absent. */
  readonly family?: WriterScope;
  /** Entries per batch syscall (tests use small ones). */
  readonly batchEntries?: number;
}

export class MapWriter {
  readonly #maps: LbMaps;
  readonly #scope: WriterScope;
  readonly #ids: { readonly first: number; readonly last: number };
  readonly #lists: WriteBatch;
  readonly #frontends: WriteBatch;
  readonly #value = Buffer.alloc(VALUE);
  #services = new Map<string, readonly Programmed[]>();
  #nextId: number;

  constructor(maps: LbMaps, options: MapWriterOptions = {}) {
    this.#maps = maps;
    this.#scope = options.family ?? "all";
    this.#ids = ID_RANGES[this.#scope];
    this.#nextId = this.#ids.first;
    this.#lists = new WriteBatch(maps, "backends", undefined, options.batchEntries);
    this.#frontends = new WriteBatch(maps, "services", this.#lists, options.batchEntries);
  }

  /** Services currently programmed. */
  get size(): number {
    return this.#services.size;
  }

  /**
   * Rewrites everything from what the maps hold: keeps entries that are right, writes the rest,
   * deletes what no Service uses. `services` is every Service's rendering; `read` is what the
   * maps hold of this writer's scope (readMaps), read now when not given.
   */
  fullSync(services: Iterable<[string, readonly RenderedGroup[]]>, read?: Adopted): WriteReport {
    const adopted = read ?? readMaps(this.#maps, [this.#scope]).get(this.#scope)!;
    if (adopted.lastId >= this.#nextId) this.#nextId = adopted.lastId + 1;
    this.#services = new Map();
    // Lists no frontend names (a write that failed half-way) go first: they may fill the map.
    const orphans = new DeleteList(CHUNK_KEY);
    const named = new Set<string>();
    for (const v of adopted.byFrontend.values()) named.add(listName(v));
    for (const [list, values] of adopted.lists) {
      if (named.has(list)) continue;
      const [id, gen] = list.split("/").map(Number) as [number, number];
      orphans.addList(id, gen, values.length);
    }
    orphans.deleteFrom(this.#maps, "backends");
    const empty = adopted.byFrontend.size === 0;
    const report = this.#apply(services, empty ? undefined : adopted);
    if (adopted.byFrontend.size === 0 && adopted.lists.size === 0) return report;
    // Whatever no Service claimed is stale.
    const live = new Set<string>();
    const liveLists = new Set<string>();
    for (const groups of this.#services.values()) {
      for (const p of groups) {
        liveLists.add(listName(p));
        for (let at = 0; at < p.frontends.length; at += FRONTEND)
          live.add(keyString(p.frontends, at, FRONTEND));
      }
    }
    const staleFrontends = new DeleteList(FRONTEND);
    for (const k of adopted.byFrontend.keys()) {
      if (!live.has(k)) staleFrontends.addString(k);
    }
    staleFrontends.deleteFrom(this.#maps, "services");
    const staleLists = new DeleteList(CHUNK_KEY);
    for (const [list, values] of adopted.lists) {
      if (liveLists.has(list) || !named.has(list)) continue;
      const [id, gen] = list.split("/").map(Number) as [number, number];
      staleLists.addList(id, gen, values.length);
    }
    staleLists.deleteFrom(this.#maps, "backends");
    return {
      ...report,
      frontendsDeleted: report.frontendsDeleted + staleFrontends.count,
      backendsDeleted: report.backendsDeleted + staleLists.count + orphans.count,
    };
  }

  /** Writes the changed Services only: each with its new rendering, or undefined when deleted. */
  update(changes: Iterable<[string, readonly RenderedGroup[] | undefined]>): WriteReport {
    return this.#apply(changes, undefined);
  }

  #apply(
    changes: Iterable<[string, readonly RenderedGroup[] | undefined]>,
    adopted: Adopted | undefined,
  ): WriteReport {
    const lists = this.#lists;
    const fronts = this.#frontends;
    lists.reset();
    fronts.reset();
    const value = this.#value;
    const frontendDeletes = new Map<string, number>();
    const listDeletes = new DeleteList(CHUNK_KEY);
    const written: (readonly Programmed[])[] = [];
    let services = 0;

    const dropList = (p: Programmed) => listDeletes.addList(p.id, p.gen, p.backends.length / BACKEND);
    const dropFrontends = (packed: Buffer, except?: ReadonlySet<string>) => {
      for (let at = 0; at < packed.length; at += FRONTEND) {
        const k = keyString(packed, at, FRONTEND);
        if (except === undefined || !except.has(k)) frontendDeletes.set(k, 1);
      }
    };
    const writeFrontends = (packed: Buffer, except?: ReadonlySet<string>) => {
      for (let at = 0; at < packed.length; at += FRONTEND) {
        if (except?.has(keyString(packed, at, FRONTEND))) continue;
        const i = fronts.next();
        packed.copy(fronts.keys, i * FRONTEND, at, at + FRONTEND);
        value.copy(fronts.values, i * VALUE);
      }
    };

    for (const [key, groups] of changes) {
      services++;
      const programmed = this.#services.get(key);
      // Nothing before, nothing now (a Service with nothing in this writer's family).
      if (programmed === undefined && (groups === undefined || groups.length === 0)) continue;
      const old = programmed ?? [];
      const now: Programmed[] = [];
      for (const g of groups ?? []) {
        const frontends = packFrontends(g.frontends);
        let prev = old.length === 0 ? undefined : old.find((p) => p.name === g.name);
        if (prev === undefined && adopted !== undefined) prev = claim(adopted, g.name, frontends);
        const backends = packBackends(g);
        const same =
          prev !== undefined &&
          prev.reject === g.reject &&
          prev.affinitySeconds === g.affinitySeconds &&
          prev.backends.equals(backends);
        const id = prev?.id ?? this.#nextId++;
        const gen = prev === undefined || same ? (prev?.gen ?? 0) : (prev.gen + 1) & 0xffff;
        const count = backends.length / BACKEND;
        if (!same) {
          const chunks = chunksOf(count);
          const first = lists.reserve(chunks);
          for (let chunk = 0; chunk < chunks; chunk++)
            writeChunkKey(lists.keys, (first + chunk) * CHUNK_KEY, id, gen, chunk);
          const at = first * CHUNK;
          backends.copy(lists.values, at);
          lists.values.fill(0, at + backends.length, at + chunks * CHUNK);
          if (prev !== undefined) dropList(prev);
        }
        writeServiceValue(value, 0, {
          id,
          gen,
          count,
          affinitySeconds: g.affinitySeconds,
          flags: g.reject ? SVC_REJECT : 0,
        });
        if (prev === undefined) {
          writeFrontends(frontends);
        } else if (!prev.frontends.equals(frontends)) {
          const before = keySet(prev.frontends);
          // Every frontend names the new list; one that already named this one stays as it is.
          writeFrontends(frontends, same ? before : undefined);
          dropFrontends(prev.frontends, keySet(frontends));
        } else if (!same) {
          writeFrontends(frontends);
        }
        now.push({
          name: g.name,
          id,
          gen,
          frontends,
          backends,
          reject: g.reject,
          affinitySeconds: g.affinitySeconds,
        });
      }
      for (const p of old) {
        if (now.some((q) => q.name === p.name)) continue;
        dropFrontends(p.frontends);
        dropList(p);
      }
      // A Service with nothing in this writer's family takes no room in its bookkeeping.
      if (now.length === 0) this.#services.delete(key);
      else this.#services.set(key, now);
      written.push(now);
    }
    // A frontend that moved to another group or Service in this write is rewritten, not deleted.
    if (frontendDeletes.size > 0) {
      for (const now of written)
        for (const p of now)
          for (let at = 0; at < p.frontends.length; at += FRONTEND)
            frontendDeletes.delete(keyString(p.frontends, at, FRONTEND));
    }
    // The bookkeeping is already the new state: if a write fails, the caller runs a full sync,
    // which re-reads the maps.
    fronts.flush();
    const deletes = new DeleteList(FRONTEND, Math.max(1, frontendDeletes.size));
    for (const k of frontendDeletes.keys()) deletes.addString(k);
    deletes.deleteFrom(this.#maps, "services");
    listDeletes.deleteFrom(this.#maps, "backends");
    return {
      services,
      frontendsWritten: fronts.added,
      frontendsDeleted: deletes.count,
      backendsWritten: lists.added,
      backendsDeleted: listDeletes.count,
    };
  }
}

function packFrontends(frontends: readonly Frontend[]): Buffer {
  const packed = Buffer.allocUnsafe(frontends.length * FRONTEND);
  for (let i = 0; i < frontends.length; i++) writeFrontend(packed, i * FRONTEND, frontends[i]!);
  return packed;
}

function packBackends(g: RenderedGroup): Buffer {
  if (g.backends.length === 0) return EMPTY;
  const packed = Buffer.allocUnsafe(g.backends.length * BACKEND);
  for (let i = 0; i < g.backends.length; i++) writeBackend(packed, i * BACKEND, g.backends[i]!);
  return packed;
}

function keySet(packed: Buffer): Set<string> {
  const out = new Set<string>();
  for (let at = 0; at < packed.length; at += FRONTEND) out.add(keyString(packed, at, FRONTEND));
  return out;
}

/** The adopted list a group's first frontend uses, as if this process had written it. */
function claim(adopted: Adopted, name: string, frontends: Buffer): Programmed | undefined {
  if (frontends.length === 0) return undefined;
  const value = adopted.byFrontend.get(keyString(frontends, 0, FRONTEND));
  if (value === undefined || adopted.claimed.has(value.id)) return undefined;
  adopted.claimed.add(value.id);
  const values = adopted.lists.get(listName(value)) ?? [];
  // A list with holes (a write that failed half-way) is not the list the value names: rewrite it.
  let complete = values.length === value.count;
  for (let i = 0; complete && i < values.length; i++) complete = values[i] !== undefined;
  return {
    name,
    id: value.id,
    gen: value.gen,
    frontends: Buffer.concat(adopted.frontends.get(value.id) ?? []),
    backends: complete ? Buffer.concat(values) : EMPTY,
    reject: (value.flags & SVC_REJECT) !== 0,
    affinitySeconds: complete ? value.affinitySeconds : -1,
  };
}

/**
 * What the maps hold, for each of `scopes`, in one pass over them: a family's full sync reads
 * the maps once, and at start the other family's full sync takes its share of the same read.
 */
export function readMaps(maps: LbMaps, scopes: readonly WriterScope[]): Map<WriterScope, Adopted> {
  const out = new Map<WriterScope, Adopted>();
  for (const scope of scopes)
    out.set(scope, {
      byFrontend: new Map(),
      frontends: new Map(),
      lists: new Map(),
      claimed: new Set(),
      lastId: 0,
    });
  const seen = (id: number) => {
    for (const [scope, a] of out) if (id > a.lastId && id <= ID_RANGES[scope].last) a.lastId = id;
  };
  const all = out.get("all");
  for (const [k, v] of maps.entries("services")) {
    const value = decodeServiceValue(v);
    seen(value.id);
    const family = out.get(k[KEY_FAMILY] as 4 | 6);
    for (const a of [all, family]) {
      if (a === undefined) continue;
      a.byFrontend.set(keyString(k, 0, FRONTEND), value);
      const list = a.frontends.get(value.id);
      if (list === undefined) a.frontends.set(value.id, [Buffer.from(k)]);
      else list.push(Buffer.from(k));
    }
  }
  for (const [k, v] of maps.entries("backends")) {
    const key = decodeChunkKey(k);
    seen(key.id);
    // A list is of one family: its first backend's.
    const family = out.get(v[BACKEND_FAMILY] as 4 | 6);
    for (const a of [all, family]) {
      if (a === undefined) continue;
      const list = listName(key);
      const values = a.lists.get(list) ?? [];
      for (const [index, b] of chunkBackends(key, v)) values[index] = Buffer.from(b);
      a.lists.set(list, values);
    }
  }
  return out;
}
