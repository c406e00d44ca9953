// Reads what an existing kpng table holds (from `nft -j list table`), so a restarted kpng can
// converge it in place instead of flushing it: traffic keeps flowing across restarts. At 100k
// Services the listing is 150 MB of JSON holding two maps of a million elements each: it is
// scanned once, and only what kpng keeps is parsed (a chain's object, a set's name, its elements a
// run of 64 KiB at a time), never the listing as one object.

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
import { STATIC_SET_NAMES } from "./base.ts";
import { STATIC } from "./names.ts";

export interface AdoptedTable {
  readonly chains: readonly string[];
  readonly sets: readonly string[];
  /** Elements of the maps and sets kpng diffs element by element: set → key → value. */
  readonly elements: ReadonlyMap<string, ReadonlyMap<string, string>>;
}

/** Sets whose elements are diffed; the interval sets are rewritten whole by the skeleton. */
const INTERVAL_SETS = new Set<string>([STATIC.nodePortIPs, STATIC.podCIDRs, STATIC.serviceCIDRs]);
const TRACKED_SETS: ReadonlySet<string> = new Set([...STATIC_SET_NAMES].filter((n) => !INTERVAL_SETS.has(n)));

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

/** One set or map (its object next): its name, and its elements when kpng diffs them. */
function readSet(r: Reader, table: AdoptedTableBuilder): void {
  let name: Json;
  const runs: [number, number][] = [];
  r.members((member) => {
    if (member === "name") name = r.value();
    else if (member === "elem")
      r.elements(() => {
        const [start, end] = r.span();
        const last = runs.at(-1);
        if (last !== undefined && end - last[0] <= ELEMENTS_TEXT) last[1] = end;
        else runs.push([start, end]);
      });
    else r.span();
  });
  if (typeof name !== "string") return;
  table.sets.push(name);
  if (!TRACKED_SETS.has(name)) return;
  const m = new Map<string, string>();
  table.elements.set(name, m);
  for (const [start, end] of runs) for (const e of r.parseAsArray(start, end)) add(m, e);
}

/** One item of the listing (`{"chain": …}`, `{"map": …}`, `{"rule": …}`): what kpng keeps of it. */
function readItem(r: Reader, table: AdoptedTableBuilder): void {
  r.members((kind) => {
    if (kind === "set" || kind === "map") readSet(r, table);
    else if (kind !== "chain") r.span();
    else {
      const chain = r.value();
      if (isObject(chain) && typeof chain.name === "string") table.chains.push(chain.name);
    }
  });
}

interface AdoptedTableBuilder {
  readonly chains: string[];
  readonly sets: string[];
  readonly elements: Map<string, Map<string, string>>;
}

/** Parses the JSON listing of one table; throws with where it stops making sense if it cannot. */
export function parseListing(bytes: Buffer): AdoptedTable {
  const r = new Reader(bytes);
  const table: AdoptedTableBuilder = { chains: [], sets: [], elements: new Map() };
  let found = false;
  try {
    r.members((name) => {
      if (name !== "nftables") {
        r.span();
        return;
      }
      found = true;
      // Each item is found whole before it is read: a listing cut short fails at the item it cut.
      r.elements(() => readItem(new Reader(bytes, r.span()[0]), table));
    });
  } catch (e) {
    if (e instanceof LayoutError) throw new Error(`nft listing: ${e.message} at byte ${e.offset}`);
    throw e;
  }
  if (!found) throw new Error("nft listing without an nftables array");
  return table;
}
