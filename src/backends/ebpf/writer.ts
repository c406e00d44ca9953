// The map writer: brings the maps in line with the rendered Services, writing only what changed.
// A Service switches to a new backend list in one step: the new list goes into fresh slots
// (id, gen+1, i) first, then each frontend's value is replaced by one that names the new slots,
// and only then are the old slots deleted. A connect therefore sees the old list or the new one,
// never half of either (the program re-reads the frontend if its slot vanished in between).
//
// A full sync (the first one, or after a failure or a repair) starts by reading what the maps
// hold, so a restarted kpng adopts the pinned maps: entries that are already right stay, and
// Services keep resolving throughout.

import {
  type Backend,
  decodeBackend,
  decodeFrontend,
  decodeServiceValue,
  decodeSlot,
  encodeBackend,
  encodeFrontend,
  encodeServiceValue,
  encodeSlot,
  type ServiceValue,
  SVC_REJECT,
} from "./layout.ts";
import type { LbMaps } from "./maps.ts";
import type { RenderedGroup } from "./render.ts";

interface Programmed {
  readonly group: RenderedGroup;
  readonly id: number;
  readonly gen: number;
}

/** What one write did, for logs, metrics and tests. */
export interface WriteReport {
  readonly services: number;
  readonly frontendsWritten: number;
  readonly frontendsDeleted: number;
  readonly backendsWritten: number;
  readonly backendsDeleted: number;
}

/** What the maps held when they were read: frontends by id, and each slot list. */
interface Adopted {
  readonly byFrontend: Map<string, ServiceValue>;
  readonly frontends: Map<number, Buffer[]>;
  readonly slots: Map<string, Backend[]>;
  readonly claimed: Set<number>;
}

const slotList = (id: number, gen: number) => `${id}/${gen}`;

export class MapWriter {
  readonly #maps: LbMaps;
  #services = new Map<string, Map<string, Programmed>>();
  #nextId = 1;

  constructor(maps: LbMaps) {
    this.#maps = maps;
  }

  /** Services currently programmed. */
  get size(): number {
    return this.#services.size;
  }

  /**
   * Rewrites everything from what the maps hold: keeps entries that are right, writes the rest,
   * deletes what no Service uses. `services` is every Service's rendering.
   */
  fullSync(services: Iterable<[string, readonly RenderedGroup[]]>): WriteReport {
    const adopted = this.#read();
    this.#services = new Map();
    // Slots no frontend names (a write that failed half-way) go first: they may fill the map.
    const orphans: Buffer[] = [];
    const named = new Set([...adopted.byFrontend.values()].map((v) => slotList(v.id, v.gen)));
    for (const [k] of this.#maps.entries("backends")) {
      const s = decodeSlot(k);
      if (!named.has(slotList(s.id, s.gen))) orphans.push(k);
    }
    this.#maps.delete("backends", orphans);
    const report = this.#apply(services, adopted);
    if (adopted.byFrontend.size === 0 && adopted.slots.size === 0) return report;
    // Whatever no Service claimed is stale.
    const live = new Set<string>();
    const liveSlots = new Set<string>();
    for (const groups of this.#services.values()) {
      for (const p of groups.values()) {
        liveSlots.add(slotList(p.id, p.gen));
        for (const f of p.group.frontends) live.add(encodeFrontend(f).toString("hex"));
      }
    }
    const staleFrontends = [...adopted.byFrontend.keys()]
      .filter((h) => !live.has(h))
      .map((h) => Buffer.from(h, "hex"));
    this.#maps.delete("services", staleFrontends);
    const staleSlots: Buffer[] = [];
    for (const [list, backends] of adopted.slots) {
      if (liveSlots.has(list)) continue;
      const [id, gen] = list.split("/").map(Number) as [number, number];
      for (let index = 0; index < backends.length; index++) staleSlots.push(encodeSlot({ id, gen, index }));
    }
    this.#maps.delete("backends", staleSlots);
    return {
      ...report,
      frontendsDeleted: report.frontendsDeleted + staleFrontends.length,
      backendsDeleted: report.backendsDeleted + staleSlots.length + orphans.length,
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
    const backendWrites: [Buffer, Buffer][] = [];
    const frontendWrites: [Buffer, Buffer][] = [];
    const frontendDeletes = new Map<string, Buffer>();
    const backendDeletes: Buffer[] = [];
    const next = new Map<string, Map<string, Programmed> | undefined>();
    let services = 0;

    const dropSlots = (p: Programmed) => {
      for (let index = 0; index < p.group.backends.length; index++)
        backendDeletes.push(encodeSlot({ id: p.id, gen: p.gen, index }));
    };

    for (const [key, groups] of changes) {
      services++;
      const old = new Map(this.#services.get(key));
      const now = new Map<string, Programmed>();
      for (const g of groups ?? []) {
        let prev = old.get(g.name);
        old.delete(g.name);
        if (prev === undefined && adopted !== undefined) prev = claim(adopted, g);
        const same = prev !== undefined && sameList(prev.group, g);
        const id = prev?.id ?? this.#nextId++;
        const gen = prev === undefined || same ? (prev?.gen ?? 0) : (prev.gen + 1) & 0xffff;
        if (!same) {
          for (const [index, be] of g.backends.entries()) {
            backendWrites.push([encodeSlot({ id, gen, index }), encodeBackend(be)]);
          }
          if (prev !== undefined) dropSlots(prev);
        }
        const value = encodeServiceValue({
          id,
          gen,
          count: g.backends.length,
          affinitySeconds: g.affinitySeconds,
          flags: g.reject ? SVC_REJECT : 0,
        });
        if (prev === undefined) {
          for (const f of g.frontends) frontendWrites.push([encodeFrontend(f), value]);
        } else {
          const before = new Set(prev.group.frontends.map((f) => encodeFrontend(f).toString("hex")));
          for (const f of g.frontends) {
            const k = encodeFrontend(f);
            const had = before.delete(k.toString("hex"));
            if (!same || !had) frontendWrites.push([k, value]);
          }
          for (const hex of before) frontendDeletes.set(hex, Buffer.from(hex, "hex"));
        }
        now.set(g.name, { group: g, id, gen });
      }
      for (const p of old.values()) {
        for (const f of p.group.frontends) {
          const k = encodeFrontend(f);
          frontendDeletes.set(k.toString("hex"), k);
        }
        dropSlots(p);
      }
      next.set(key, groups === undefined ? undefined : now);
    }
    // A frontend that moved to another group or Service in this write is rewritten, not deleted.
    if (frontendDeletes.size > 0) for (const [k] of frontendWrites) frontendDeletes.delete(k.toString("hex"));

    // Commit the bookkeeping before writing: if a write fails, the caller runs a full sync,
    // which re-reads the maps.
    for (const [key, groups] of next) {
      if (groups === undefined) this.#services.delete(key);
      else this.#services.set(key, groups);
    }
    this.#maps.update("backends", backendWrites);
    this.#maps.update("services", frontendWrites);
    this.#maps.delete("services", [...frontendDeletes.values()]);
    this.#maps.delete("backends", backendDeletes);
    return {
      services,
      frontendsWritten: frontendWrites.length,
      frontendsDeleted: frontendDeletes.size,
      backendsWritten: backendWrites.length,
      backendsDeleted: backendDeletes.length,
    };
  }

  #read(): Adopted {
    const byFrontend = new Map<string, ServiceValue>();
    const frontends = new Map<number, Buffer[]>();
    for (const [k, v] of this.#maps.entries("services")) {
      const value = decodeServiceValue(v);
      byFrontend.set(k.toString("hex"), value);
      frontends.set(value.id, [...(frontends.get(value.id) ?? []), Buffer.from(k)]);
      if (value.id >= this.#nextId) this.#nextId = value.id + 1;
    }
    const slots = new Map<string, Backend[]>();
    for (const [k, v] of this.#maps.entries("backends")) {
      const s = decodeSlot(k);
      const list = slotList(s.id, s.gen);
      const backends = slots.get(list) ?? [];
      backends[s.index] = decodeBackend(v);
      slots.set(list, backends);
      if (s.id >= this.#nextId) this.#nextId = s.id + 1;
    }
    return { byFrontend, frontends, slots, claimed: new Set() };
  }
}

/** The adopted list a group's first frontend uses, as if this process had written it. */
function claim(adopted: Adopted, g: RenderedGroup): Programmed | undefined {
  const first = g.frontends[0];
  if (first === undefined) return undefined;
  const value = adopted.byFrontend.get(encodeFrontend(first).toString("hex"));
  if (value === undefined || adopted.claimed.has(value.id)) return undefined;
  adopted.claimed.add(value.id);
  const backends = adopted.slots.get(slotList(value.id, value.gen)) ?? [];
  // A list with holes (a write that failed half-way) is not the list the value names: rewrite it.
  const complete = backends.length === value.count && backends.every((b) => b !== undefined);
  return {
    id: value.id,
    gen: value.gen,
    group: {
      name: g.name,
      frontends: (adopted.frontends.get(value.id) ?? []).map(decodeFrontend),
      backends: complete ? backends : [],
      reject: (value.flags & SVC_REJECT) !== 0,
      affinitySeconds: complete ? value.affinitySeconds : -1,
    },
  };
}

function sameList(a: RenderedGroup, b: RenderedGroup): boolean {
  if (a.reject !== b.reject || a.affinitySeconds !== b.affinitySeconds) return false;
  if (a.backends.length !== b.backends.length) return false;
  return a.backends.every((x, i) => x.ip === b.backends[i]!.ip && x.port === b.backends[i]!.port);
}
