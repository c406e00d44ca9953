// Reads what an existing kpng table holds (from `nft -j list table`), so a restarted kpng can
// converge it in place instead of flushing it: traffic keeps flowing across restarts. At 100k
// Services the listing is 150 MB of JSON holding two maps of a million elements each: it is read
// a piece at a time (an item, or a run of a map's elements), never built as one object.

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

/** An item of the listing (`{"set": …}`, `{"chain": …}`) at most this long is parsed whole. */
const WHOLE_ITEM = 1024 * 1024;

class Listing {
  readonly chains: string[] = [];
  readonly sets: string[] = [];
  readonly elements = new Map<string, Map<string, string>>();

  item(item: Json): void {
    if (!isObject(item)) return;
    if (isObject(item.chain) && typeof item.chain.name === "string") this.chains.push(item.chain.name);
    const set = isObject(item.set) ? item.set : isObject(item.map) ? item.map : undefined;
    if (set === undefined || typeof set.name !== "string") return;
    const m = this.set(set.name);
    if (m !== undefined && Array.isArray(set.elem)) for (const e of set.elem) add(m, e);
  }

  /** A set or map by name; its element map when its elements are diffed. */
  set(name: string): Map<string, string> | undefined {
    this.sets.push(name);
    if (!TRACKED_SETS.has(name)) return undefined;
    const m = new Map<string, string>();
    this.elements.set(name, m);
    return m;
  }
}

function add(m: Map<string, string>, e: Json): void {
  if (Array.isArray(e)) m.set(keyText(e[0]), valueText(e[1]));
  else m.set(keyText(e), "");
}

/** Reads the listing's bytes a value at a time; throws with the offset where they stop making sense. */
class Reader {
  readonly #b: Buffer;
  #i: number;
  constructor(bytes: Buffer, at = 0) {
    this.#b = bytes;
    this.#i = at;
  }

  fail(what: string): never {
    throw new Error(`nft listing: ${what} at byte ${this.#i}`);
  }

  /** Consumes `byte` (after spaces) when it is next. */
  take(byte: number): boolean {
    this.#i = skipSpace(this.#b, this.#i);
    if (this.#b[this.#i] !== byte) return false;
    this.#i++;
    return true;
  }

  expect(byte: number, what: string): void {
    if (!this.take(byte)) this.fail(`expected ${what}`);
  }

  /** The next value's bytes [start, end), consumed. */
  span(): [number, number] {
    this.#i = skipSpace(this.#b, this.#i);
    const start = this.#i;
    this.#i = skipValue(this.#b, start);
    return [start, this.#i];
  }

  parse(start: number, end: number): Json {
    return JSON.parse(jsonText(this.#b, start, end, false));
  }

  /** The next value, parsed. */
  value(): Json {
    const [start, end] = this.span();
    return this.parse(start, end);
  }

  /** The members of the object that opens next: `member(name)` reads each value. */
  members(member: (name: string) => void): void {
    this.expect(OPEN_BRACE, "{");
    if (this.take(CLOSE_BRACE)) return;
    do {
      const name = this.value();
      if (typeof name !== "string") this.fail("expected a member name");
      this.expect(COLON, ":");
      member(name);
    } while (this.take(COMMA));
    this.expect(CLOSE_BRACE, "}");
  }

  /** The elements of the array that opens next, as spans: `element(start, end)` for each. */
  elements(element: (start: number, end: number) => void): void {
    this.expect(OPEN_BRACKET, "[");
    if (this.take(CLOSE_BRACKET)) return;
    do element(...this.span());
    while (this.take(COMMA));
    this.expect(CLOSE_BRACKET, "]");
  }
}

/** A large item (from `start`): its set's elements parsed a run at a time, its other members whole. */
function largeItem(bytes: Buffer, start: number, listing: Listing): void {
  const item = new Reader(bytes, start);
  item.members((kind) => {
    if (kind !== "set" && kind !== "map") {
      listing.item({ [kind]: item.value() });
      return;
    }
    const header: Record<string, Json> = {};
    const runs: [number, number][] = [];
    item.members((name) => {
      if (name !== "elem") {
        header[name] = item.value();
        return;
      }
      item.elements((s, e) => {
        const last = runs.at(-1);
        if (last !== undefined && e - last[0] <= ELEMENTS_TEXT) last[1] = e;
        else runs.push([s, e]);
      });
    });
    const m = typeof header.name === "string" ? listing.set(header.name) : undefined;
    if (m === undefined) return;
    // A run is `e1, e2, …` as nft printed it: parsed as one array.
    for (const [s, e] of runs) {
      const elements = JSON.parse(`[${jsonText(bytes, s, e, false)}]`) as Json[];
      for (const el of elements) add(m, el);
    }
  });
}

/** Parses the JSON listing of one table; throws with where it stops making sense if it cannot. */
export function parseListing(bytes: Buffer): AdoptedTable {
  const r = new Reader(bytes);
  const listing = new Listing();
  let found = false;
  try {
    r.members((name) => {
      if (name !== "nftables") {
        r.span();
        return;
      }
      found = true;
      r.elements((start, end) => {
        if (end - start <= WHOLE_ITEM) listing.item(r.parse(start, end));
        else largeItem(bytes, start, listing);
      });
    });
  } catch (e) {
    if (e instanceof LayoutError) throw new Error(`nft listing: ${e.message} at byte ${e.offset}`);
    throw e;
  }
  if (!found) throw new Error("nft listing without an nftables array");
  return { chains: listing.chains, sets: listing.sets, elements: listing.elements };
}
