// An in-memory nft for tests. It parses the transactions kpng writes, applies them atomically
// (all or nothing, like `nft -f`), and fails the way the kernel does: a reference to a missing
// chain, set or map, a deleted object that is missing or still referenced, an element added
// twice with different values. It lives beside the real runner so any test can use it.

import {
  listingArgs,
  NftError,
  type NftListing,
  NftRejected,
  type NftRunner,
} from "../../src/backends/nft/runner.ts";
import type { NftFamily } from "../../src/model/ip.ts";

interface FakeChain {
  readonly hook: string | undefined;
  rules: string[];
}

interface FakeSet {
  readonly isMap: boolean;
  readonly decl: string;
  readonly elements: Map<string, string>;
}

interface FakeTable {
  readonly chains: Map<string, FakeChain>;
  readonly sets: Map<string, FakeSet>;
}

const NAME = "[A-Za-z0-9/_.\\\\-]+";
const CHAIN_REF = new RegExp(`\\b(?:jump|goto) (${NAME})`, "g");
const SET_REF = new RegExp(`@(${NAME})`, "g");

function clone(tables: Map<string, FakeTable>): Map<string, FakeTable> {
  const out = new Map<string, FakeTable>();
  for (const [k, t] of tables) {
    const chains = new Map<string, FakeChain>();
    for (const [n, c] of t.chains) chains.set(n, { hook: c.hook, rules: [...c.rules] });
    const sets = new Map<string, FakeSet>();
    for (const [n, s] of t.sets) sets.set(n, { isMap: s.isMap, decl: s.decl, elements: new Map(s.elements) });
    out.set(k, { chains, sets });
  }
  return out;
}

function braces(rest: string): string {
  const open = rest.indexOf("{");
  const close = rest.lastIndexOf("}");
  if (open < 0 || close < open) throw new Error(`expected { … } in "${rest}"`);
  return rest.slice(open + 1, close).trim();
}

export class FakeNft implements NftRunner {
  #tables = new Map<string, FakeTable>();
  /** Every transaction passed to run(), successful or not, in order. */
  readonly transactions: string[] = [];
  #failures: Array<(text: string) => boolean> = [];

  /** Makes the next run() whose text matches `when` (default: any) fail without applying. */
  failNext(when: (text: string) => boolean = () => true): void {
    this.#failures.push(when);
  }

  /**
   * Makes every run() whose text matches fail with `stderr` (as nft prints it) until the returned
   * function is called: a persistent fault such as a conflicting object in the table (nft
   * refuses), or, with "deadline", an nft that keeps running past its deadline and is killed.
   */
  failWhile(
    when: (text: string) => boolean,
    stderr = "Error: injected failure",
    how: "refused" | "deadline" = "refused",
  ): () => void {
    const rule = { when, stderr, how };
    this.#persistent.add(rule);
    return () => this.#persistent.delete(rule);
  }

  /** Makes the next run() whose text matches (default: any) never settle: a hung nft. */
  hangNext(when: (text: string) => boolean = () => true): void {
    this.#hangs.push(when);
  }

  /** Makes list() fail with `message` (nft missing, no permission) until the returned function is called. */
  failListing(message: string): () => void {
    this.#listingFailure = message;
    return () => {
      this.#listingFailure = undefined;
    };
  }

  #persistent = new Set<{ when: (text: string) => boolean; stderr: string; how: "refused" | "deadline" }>();
  #hangs: Array<(text: string) => boolean> = [];
  #listingFailure: string | undefined;

  async run(text: string): Promise<void> {
    this.transactions.push(text);
    const h = this.#hangs.findIndex((f) => f(text));
    if (h >= 0) {
      this.#hangs.splice(h, 1);
      await new Promise<never>(() => {});
    }
    const i = this.#failures.findIndex((f) => f(text));
    if (i >= 0) {
      this.#failures.splice(i, 1);
      throw new NftRejected("nft -f failed: injected failure", "injected failure");
    }
    for (const rule of this.#persistent) {
      if (!rule.when(text)) continue;
      if (rule.how === "deadline")
        throw new NftError("nft -f did not finish within 60000 ms; killed", rule.stderr);
      throw new NftRejected(`nft -f failed: ${rule.stderr.split("\n")[0]}`, rule.stderr);
    }
    this.#tables = this.#apply(text);
  }

  async check(text: string): Promise<void> {
    this.#apply(text);
  }

  /** Every listing asked for, as nft's arguments. */
  readonly listings: string[] = [];

  async list(family: NftFamily, table: string, what: NftListing): Promise<Buffer | undefined> {
    this.listings.push(listingArgs(family, table, what).join(" "));
    if (this.#listingFailure !== undefined) throw new NftError(this.#listingFailure, this.#listingFailure);
    const t = this.#tables.get(`${family} ${table}`);
    // The shapes `nft -j` prints: numbers as numbers, concatenations as `concat`.
    const key = (k: string) => {
      const parts = k.split(" . ").map((p) => (/^\d+$/.test(p) ? Number(p) : p));
      return parts.length > 1 ? { concat: parts } : parts[0];
    };
    const value = (v: string) => {
      if (v.includes(" . ")) return key(v);
      const [verb, target] = v.split(" ");
      return target ? { [verb ?? ""]: { target } } : { [v]: null };
    };
    const set = (of: string, name: string, s: FakeSet, withElements: boolean) => {
      const elem = withElements
        ? [...s.elements].map(([k, v]) => (s.isMap ? [key(k), value(v)] : key(k)))
        : [];
      return { [s.isMap ? "map" : "set"]: { family, table: of, name, ...(elem.length ? { elem } : {}) } };
    };
    const items: unknown[] = [{ metainfo: { json_schema_version: 1 } }];
    if ("name" in what) {
      const s = t?.sets.get(what.name);
      if (s === undefined || s.isMap !== (what.kind === "map")) return undefined;
      items.push(set(table, what.name, s, true));
    } else if (what.objects === "sets") {
      if (t === undefined) return undefined;
      for (const [name, s] of t.sets) if (!s.isMap) items.push(set(table, name, s, false));
    } else {
      // Every table of the family, as `list maps <family>` and `list chains <family>` answer.
      for (const [k, other] of this.#tables) {
        const [f, name] = k.split(" ") as [string, string];
        if (f !== family) continue;
        if (what.objects === "maps") {
          for (const [n, s] of other.sets) if (s.isMap) items.push(set(name, n, s, false));
        } else for (const n of other.chains.keys()) items.push({ chain: { family, table: name, name: n } });
      }
    }
    return Buffer.from(JSON.stringify({ nftables: items }));
  }

  /** Rules of a chain, or undefined when it does not exist. */
  rules(family: NftFamily, table: string, chain: string): readonly string[] | undefined {
    return this.#tables.get(`${family} ${table}`)?.chains.get(chain)?.rules;
  }

  /** Elements of a set or map (key → value, "" for sets), or undefined when it does not exist. */
  elements(family: NftFamily, table: string, set: string): ReadonlyMap<string, string> | undefined {
    return this.#tables.get(`${family} ${table}`)?.sets.get(set)?.elements;
  }

  chainNames(family: NftFamily, table: string): string[] {
    return [...(this.#tables.get(`${family} ${table}`)?.chains.keys() ?? [])];
  }

  setNames(family: NftFamily, table: string): string[] {
    return [...(this.#tables.get(`${family} ${table}`)?.sets.keys() ?? [])];
  }

  hasTable(family: NftFamily, table: string): boolean {
    return this.#tables.has(`${family} ${table}`);
  }

  /**
   * dump() with the generation of endpoint maps and pick chains left out of their names: the
   * tables of a restarted kpng (which writes the other generation) and of a fresh one compare
   * equal when they serve the same way.
   */
  dumpAnyGeneration(): string {
    const blocks: string[] = [];
    for (const line of this.dump().replaceAll("-g1", "").split("\n")) {
      if (line === "") continue;
      const sorted = line.replace(
        /= \{ (.*) \}$/,
        (_, els: string) => `= { ${els.split(", ").sort().join(", ")} }`,
      );
      if (line.startsWith("    ")) blocks[blocks.length - 1] += `\n${sorted}`;
      else blocks.push(sorted);
    }
    // Chains and sets sort by name within their table, whose line comes first.
    const out: string[] = [];
    let table: string[] = [];
    for (const b of blocks) {
      if (b.startsWith("table ")) {
        out.push(...table.sort());
        table = [];
        out.push(b);
      } else table.push(b);
    }
    out.push(...table.sort());
    return `${out.join("\n")}\n`;
  }

  /** A canonical, sorted text of the whole ruleset, for comparing two states. */
  dump(): string {
    const out: string[] = [];
    for (const k of [...this.#tables.keys()].sort()) {
      const t = this.#tables.get(k)!;
      out.push(`table ${k}`);
      for (const n of [...t.sets.keys()].sort()) {
        const s = t.sets.get(n)!;
        const els = [...s.elements].map(([key, v]) => (v ? `${key} : ${v}` : key)).sort();
        out.push(`  ${s.isMap ? "map" : "set"} ${n} ${s.decl} = { ${els.join(", ")} }`);
      }
      for (const n of [...t.chains.keys()].sort()) {
        const c = t.chains.get(n)!;
        out.push(`  chain ${n}${c.hook ? ` ${c.hook}` : ""}`);
        for (const r of c.rules) out.push(`    ${r}`);
      }
    }
    return `${out.join("\n")}\n`;
  }

  #apply(text: string): Map<string, FakeTable> {
    const tables = clone(this.#tables);
    text.split("\n").forEach((line, i) => {
      const stmt = line.trim();
      if (stmt === "" || stmt.startsWith("#")) return;
      try {
        applyStatement(tables, stmt);
      } catch (e) {
        const msg = e instanceof Error ? e.message : String(e);
        throw new NftRejected(`nft -f failed at line ${i + 1}: ${msg}`, `${msg}\n${stmt}`);
      }
    });
    return tables;
  }
}

function applyStatement(tables: Map<string, FakeTable>, stmt: string): void {
  const m =
    /^(add|create|delete|destroy|flush) (table|chain|rule|set|map|element) (ip6?|inet) (\S+)(?: (\S+))?(?: (.*))?$/.exec(
      stmt,
    );
  if (!m) throw new Error(`cannot parse "${stmt}"`);
  const [, verb, kind, family, tableName, name = "", rest = ""] = m;
  const tkey = `${family} ${tableName}`;
  if (kind === "table") {
    if (verb === "add") {
      if (!tables.has(tkey)) tables.set(tkey, { chains: new Map(), sets: new Map() });
    } else if (verb === "delete") {
      if (!tables.delete(tkey)) throw new Error(`No such file or directory: table ${tkey}`);
    } else if (verb === "flush") {
      const t = mustTable(tables, tkey);
      for (const c of t.chains.values()) c.rules = [];
      for (const s of t.sets.values()) s.elements.clear();
    } else throw new Error(`unsupported: ${stmt}`);
    return;
  }
  const t = mustTable(tables, tkey);
  switch (kind) {
    case "chain":
      chainStatement(t, verb ?? "", name, rest);
      return;
    case "rule": {
      const c = t.chains.get(name);
      if (!c) throw new Error(`No such file or directory: chain ${name}`);
      if (verb !== "add") throw new Error(`unsupported: ${stmt}`);
      checkRefs(t, rest);
      c.rules.push(rest);
      return;
    }
    case "set":
    case "map":
      setStatement(t, verb ?? "", kind, name, rest);
      return;
    case "element":
      elementStatement(t, verb ?? "", name, rest);
      return;
  }
}

function mustTable(tables: Map<string, FakeTable>, key: string): FakeTable {
  const t = tables.get(key);
  if (!t) throw new Error(`No such file or directory: table ${key}`);
  return t;
}

function checkRefs(t: FakeTable, text: string): void {
  for (const [, chain] of text.matchAll(CHAIN_REF)) {
    if (chain && !t.chains.has(chain)) throw new Error(`No such file or directory: chain ${chain}`);
  }
  for (const [, set] of text.matchAll(SET_REF)) {
    if (set && !t.sets.has(set)) throw new Error(`No such file or directory: set ${set}`);
  }
}

function chainReferenced(t: FakeTable, name: string): boolean {
  for (const c of t.chains.values()) {
    for (const r of c.rules) for (const [, ref] of r.matchAll(CHAIN_REF)) if (ref === name) return true;
  }
  for (const s of t.sets.values()) {
    for (const v of s.elements.values()) if (v === `goto ${name}` || v === `jump ${name}`) return true;
  }
  return false;
}

function chainStatement(t: FakeTable, verb: string, name: string, rest: string): void {
  const c = t.chains.get(name);
  if (verb === "add") {
    if (!c) t.chains.set(name, { hook: rest ? rest : undefined, rules: [] });
  } else if (verb === "flush") {
    if (!c) throw new Error(`No such file or directory: chain ${name}`);
    c.rules = [];
  } else if (verb === "delete") {
    if (!c) throw new Error(`No such file or directory: chain ${name}`);
    if (c.rules.length > 0 || chainReferenced(t, name))
      throw new Error(`Device or resource busy: chain ${name}`);
    t.chains.delete(name);
  } else throw new Error(`unsupported chain verb ${verb}`);
}

function setStatement(t: FakeTable, verb: string, kind: string, name: string, rest: string): void {
  const s = t.sets.get(name);
  if (verb === "add") {
    // As nft: adding what exists is a no-op, under the same name with another declaration an error.
    if (s && (s.isMap !== (kind === "map") || s.decl !== rest))
      throw new Error(`File exists: ${kind} ${name} is declared otherwise`);
    if (!s) t.sets.set(name, { isMap: kind === "map", decl: rest, elements: new Map() });
  } else if (verb === "flush") {
    if (!s) throw new Error(`No such file or directory: ${kind} ${name}`);
    s.elements.clear();
  } else if (verb === "delete") {
    if (!s) throw new Error(`No such file or directory: ${kind} ${name}`);
    for (const c of t.chains.values()) {
      for (const r of c.rules)
        for (const [, ref] of r.matchAll(SET_REF)) {
          if (ref === name) throw new Error(`Device or resource busy: ${kind} ${name}`);
        }
    }
    t.sets.delete(name);
  } else throw new Error(`unsupported set verb ${verb}`);
}

function elementStatement(t: FakeTable, verb: string, name: string, rest: string): void {
  const s = t.sets.get(name);
  if (!s) throw new Error(`No such file or directory: set ${name}`);
  for (const item of braces(rest).split(",")) {
    const [rawKey = "", rawValue = ""] = item.split(" : ");
    const key = rawKey.trim();
    const value = rawValue.trim();
    if (verb === "add") {
      if (s.isMap && value === "") throw new Error(`map element ${key} without a value`);
      checkRefs(t, value);
      const existing = s.elements.get(key);
      if (existing !== undefined && existing !== value) throw new Error(`File exists: element ${key}`);
      s.elements.set(key, value);
    } else if (verb === "delete") {
      if (!s.elements.delete(key)) throw new Error(`No such file or directory: element ${key}`);
    } else throw new Error(`unsupported element verb ${verb}`);
  }
}
