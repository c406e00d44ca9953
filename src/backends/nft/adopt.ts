// Reads what an existing kpng table holds, so a restarted kpng can converge it in place instead of
// flushing it: traffic keeps flowing across restarts. The names of its chains, sets and maps
// come first (declarations only, a few milliseconds whatever the size), then the elements of the
// maps and sets kpng diffs one by one. The endpoint maps are not listed: the kernel walks a map
// from its start for every batch of a dump, so listing one costs the square of its size, and
// at 100k Services they hold a million elements each (docs/nft.md, "Restarts at scale"). Instead
// the restart writes the other generation of them (names.ts) and retires the one that served.
// A listing is scanned once, and only what kpng keeps is parsed (a chain's object, a set's name,
// its elements a run of 64 KiB at a time), never the listing as one object.

import {
  CLOSE_BRACE,
  CLOSE_BRACKET,
  COLON,
  COMMA,
  jsonText,
  LayoutError,
  OPEN_BRACE,
  OPEN_BRACKET,
  skipSpace,
  skipValue,
} from "../../lib/json-layout.ts";
import { isPlainObject } from "../../model/field-reader.ts";
import type { NftFamily } from "../../model/ip.ts";
import { STATIC_SET_NAMES } from "./base.ts";
import { endpointsMaps, type Generation, generationsOf, nextGeneration, STATIC } from "./names.ts";
import type { NftRunner } from "./runner.ts";

export interface AdoptedTable {
  readonly chains: readonly string[];
  readonly sets: readonly string[];
  /** Elements of the maps and sets kpng diffs element by element: set → key → value. */
  readonly elements: ReadonlyMap<string, ReadonlyMap<string, string>>;
  /** The generation of endpoint maps and pick chains to write: the one the table does not serve from. */
  readonly generation: Generation;
}

/** Sets whose elements are diffed; the interval sets are rewritten whole by the skeleton. */
const INTERVAL_SETS = new Set<string>([STATIC.nodePortIPs, STATIC.podCIDRs, STATIC.serviceCIDRs]);
const TRACKED_SETS: readonly string[] = [...STATIC_SET_NAMES].filter((n) => !INTERVAL_SETS.has(n));

type Json = unknown;
const isObject: (x: Json) => x is Record<string, Json> = isPlainObject;

/** One key component or key as kpng writes it: `10.0.0.1 . tcp . 80`. */
function keyText(x: Json): string {
  if (typeof x === "string" || typeof x === "number") return String(x);
  if (isObject(x) && Array.isArray(x.concat)) return x.concat.map(keyText).join(" . ");
  if (isObject(x) && isObject(x.prefix)) return `${String(x.prefix.addr)}/${String(x.prefix.len)}`;
  if (isObject(x) && "elem" in x && isObject(x.elem)) return keyText(x.elem.val);
  throw new Error(`unexpected element key ${JSON.stringify(x)}`);
}

/** A map value as kpng writes it: a verdict (`goto x`, `drop`) or an endpoint (`10.1.0.5 . 8080`). */
function valueText(x: Json): string {
  if (isObject(x) && Array.isArray(x.concat)) return keyText(x);
  if (isObject(x)) {
    for (const v of ["goto", "jump"] as const) {
      const target = x[v];
      if (isObject(target) && typeof target.target === "string") return `${v} ${target.target}`;
    }
    for (const v of ["drop", "accept", "return", "continue"]) if (v in x) return v;
  }
  throw new Error(`unexpected map value ${JSON.stringify(x)}`);
}

/** Elements parsed at once: as many as fit in this much text. */
const ELEMENTS_TEXT = 64 * 1024;

function add(m: Map<string, string>, e: Json): void {
  if (Array.isArray(e)) m.set(keyText(e[0]), valueText(e[1]));
  else m.set(keyText(e), "");
}

/** Reads the listing's bytes a value at a time; a value it skips is only scanned, never parsed. */
class Reader {
  readonly #b: Buffer;
  #i: number;
  constructor(bytes: Buffer, at = 0) {
    this.#b = bytes;
    this.#i = at;
  }

  /** Consumes `byte` (after spaces) when it is next. */
  take(byte: number): boolean {
    this.#i = skipSpace(this.#b, this.#i);
    if (this.#b[this.#i] !== byte) return false;
    this.#i++;
    return true;
  }

  expect(byte: number, what: string): void {
    if (!this.take(byte)) throw new LayoutError(this.#i, `expected ${what}`);
  }

  /** The next value's bytes [start, end), consumed. */
  span(): [number, number] {
    this.#i = skipSpace(this.#b, this.#i);
    const start = this.#i;
    this.#i = skipValue(this.#b, start);
    return [start, this.#i];
  }

  /** `[` + the text of [start, end) + `]`, parsed: one value, or a run of an array's elements. */
  parseAsArray(start: number, end: number): Json[] {
    return JSON.parse(`[${jsonText(this.#b, start, end, false)}]`) as Json[];
  }

  /** The next value, parsed. */
  value(): Json {
    return this.parseAsArray(...this.span())[0];
  }

  /** The members of the object that opens next: `member(name)` reads each value. */
  members(member: (name: string) => void): void {
    this.expect(OPEN_BRACE, "{");
    if (this.take(CLOSE_BRACE)) return;
    do {
      const at = this.#i;
      const name = this.value();
      if (typeof name !== "string") throw new LayoutError(at, "expected a member name");
      this.expect(COLON, ":");
      member(name);
    } while (this.take(COMMA));
    this.expect(CLOSE_BRACE, "}");
  }

  /** The elements of the array that opens next: `element()` reads each. */
  elements(element: () => void): void {
    this.expect(OPEN_BRACKET, "[");
    if (this.take(CLOSE_BRACKET)) return;
    do element();
    while (this.take(COMMA));
    this.expect(CLOSE_BRACKET, "]");
  }
}

/** One set or map (its object next) of kpng's table: its name, and its elements. */
function readSet(r: Reader, kind: "set" | "map", table: TableReader): void {
  let name: Json;
  let of: Json;
  const runs: [number, number][] = [];
  r.members((member) => {
    if (member === "name") name = r.value();
    else if (member === "table") of = r.value();
    else if (member === "elem")
      r.elements(() => {
        const [start, end] = r.span();
        const last = runs.at(-1);
        if (last !== undefined && end - last[0] <= ELEMENTS_TEXT) last[1] = end;
        else runs.push([start, end]);
      });
    else r.span();
  });
  if (typeof name !== "string" || of !== table.name) return;
  if (!table.kinds.has(name)) table.kinds.set(name, kind);
  if (runs.length === 0) return;
  let m = table.elements.get(name);
  if (m === undefined) {
    m = new Map<string, string>();
    table.elements.set(name, m);
  }
  for (const [start, end] of runs) for (const e of r.parseAsArray(start, end)) add(m, e);
}

/** One item of a listing (`{"chain": …}`, `{"map": …}`, `{"rule": …}`): what kpng keeps of it. */
function readItem(r: Reader, table: TableReader): void {
  r.members((kind) => {
    if (kind === "set" || kind === "map") readSet(r, kind, table);
    else if (kind !== "chain") r.span();
    else {
      const chain = r.value();
      if (isObject(chain) && chain.table === table.name && typeof chain.name === "string")
        table.chains.push(chain.name);
    }
  });
}

/** What the listings of one table said so far: the objects of other tables are skipped. */
export class TableReader {
  readonly name: string;
  readonly chains: string[] = [];
  /** Every set and map, and which of the two it is. */
  readonly kinds = new Map<string, "set" | "map">();
  readonly elements = new Map<string, Map<string, string>>();

  constructor(table: string) {
    this.name = table;
  }

  /** Reads one JSON listing; throws with where it stops making sense if it cannot. */
  read(bytes: Buffer): void {
    const r = new Reader(bytes);
    let found = false;
    try {
      r.members((name) => {
        if (name !== "nftables") {
          r.span();
          return;
        }
        found = true;
        // Each item is found whole before it is read: a listing cut short fails at the item it cut.
        r.elements(() => readItem(new Reader(bytes, r.span()[0]), this));
      });
    } catch (e) {
      if (e instanceof LayoutError) throw new Error(`nft listing: ${e.message} at byte ${e.offset}`);
      throw e;
    }
    if (!found) throw new Error("nft listing without an nftables array");
  }

  adopted(generation: Generation): AdoptedTable {
    return { chains: this.chains, sets: [...this.kinds.keys()], elements: this.elements, generation };
  }
}

/**
 * What kpng's table holds, or undefined when it does not exist: its objects' names, and the
 * elements of the sets and maps diffed one by one. The next plan writes the endpoint maps of the
 * generation that does not serve, so theirs are never listed; only when both generations are in
 * the table (a restart stopped between writing one and retiring the other) are generation 0's
 * listed, to be diffed and kept.
 */
export async function readTable(
  runner: Pick<NftRunner, "list">,
  family: NftFamily,
  table: string,
): Promise<AdoptedTable | undefined> {
  const reader = new TableReader(table);
  for (const objects of ["sets", "maps", "chains"] as const) {
    const listed = await runner.list(family, table, { objects });
    if (listed === undefined) return undefined;
    reader.read(listed);
  }
  const serving = generationsOf(reader.kinds.keys());
  const generation = serving.size === 1 ? nextGeneration([...serving][0]!) : 0;
  const listed = serving.size === 2 ? [...TRACKED_SETS, ...endpointsMaps(0)] : TRACKED_SETS;
  for (const name of listed) {
    const kind = reader.kinds.get(name);
    if (kind === undefined) continue;
    const elements = await runner.list(family, table, { kind, name });
    if (elements === undefined)
      throw new Error(`${kind} ${name} of table ${family} ${table} went away while listed`);
    reader.read(elements);
  }
  return reader.adopted(generation);
}
