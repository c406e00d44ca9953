// Reads what an existing kpng table holds (from `nft -j list table`), so a restarted kpng can
// converge it in place instead of flushing it: traffic keeps flowing across restarts.

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

/** Parses the JSON listing of one table; throws with the offending fragment if it cannot. */
export function parseListing(json: Json): AdoptedTable {
  if (!isObject(json) || !Array.isArray(json.nftables))
    throw new Error("nft listing without an nftables array");
  const chains: string[] = [];
  const sets: string[] = [];
  const elements = new Map<string, Map<string, string>>();
  for (const item of json.nftables) {
    if (!isObject(item)) continue;
    if (isObject(item.chain) && typeof item.chain.name === "string") chains.push(item.chain.name);
    const set = isObject(item.set) ? item.set : isObject(item.map) ? item.map : undefined;
    if (!set || typeof set.name !== "string") continue;
    sets.push(set.name);
    if (!TRACKED_SETS.has(set.name)) continue;
    const m = new Map<string, string>();
    for (const e of Array.isArray(set.elem) ? set.elem : []) {
      if (Array.isArray(e)) m.set(keyText(e[0]), valueText(e[1]));
      else m.set(keyText(e), "");
    }
    elements.set(set.name, m);
  }
  return { chains, sets, elements };
}
