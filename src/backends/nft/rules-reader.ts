// `kpng explain --rules nft`: the map and set elements and the chains that implement one Service
// in kpng's nft tables, read from the kernel one element at a time (`nft get element`) and
// compared with what serviceFragment writes for the brain's state of it. Never a listing of a
// chain's rules or of a whole map: nft then loads every element of the table, minutes at 100k
// Services.

import { execCommand } from "../../host/exec.ts";
import type { LocalService } from "../../model/local.ts";
import type { RulesReader, RulesReport } from "../../plugin/rules-reader.ts";
import type { TableConfig } from "./fragment.ts";
import { type Generation, generationsOf, STATIC } from "./names.ts";
import { serviceFragment } from "./render-service.ts";

/** Runs one `nft` query; undefined when nft says the object does not exist. */
export interface NftQuery {
  /** `nft -j …`, parsed. */
  json(args: readonly string[]): Promise<unknown>;
  /** `nft …` as text (`get element` answers in text only, even with -j). */
  text(args: readonly string[]): Promise<string | undefined>;
}

const QUERY_TIMEOUT_MS = 10_000;

class ExecNftQuery implements NftQuery {
  async json(args: readonly string[]): Promise<unknown> {
    const out = await this.text(["-j", ...args]);
    return out === undefined ? undefined : (JSON.parse(out) as unknown);
  }

  async text(args: readonly string[]): Promise<string | undefined> {
    const argv = ["nft", ...args];
    const r = await execCommand(argv, { timeoutMs: QUERY_TIMEOUT_MS });
    if (r.timedOut) throw new Error(`${argv.join(" ")} did not finish within ${QUERY_TIMEOUT_MS} ms`);
    if (r.code !== 0) {
      if (/No such file or directory|does not exist/i.test(r.stderr)) return undefined;
      throw new Error(`${argv.join(" ")}: ${r.stderr.trim()}`);
    }
    return r.stdout;
  }
}

/**
 * The elements of nft's text answer to `get element`: key → value ("" for a set member), from
 * `elements = { 10.0.0.1 . tcp . 80 : goto pick-2, … }`.
 */
export function elementsOfText(text: string): Map<string, string> {
  const out = new Map<string, string>();
  const body = /elements = \{([^}]*)\}/.exec(text)?.[1] ?? "";
  for (const entry of body.split(",")) {
    const trimmed = entry.replace(/\s+/g, " ").trim();
    if (trimmed === "") continue;
    const at = trimmed.indexOf(" : ");
    if (at < 0) out.set(trimmed, "");
    else out.set(trimmed.slice(0, at), trimmed.slice(at + 3));
  }
  return out;
}

/** Keys that must sit in exactly one of two maps: a port has endpoints, or it rejects/drops. */
const EXCLUSIVE: Readonly<Record<string, string>> = {
  [STATIC.serviceIPs]: STATIC.noEndpointServices,
  [STATIC.noEndpointServices]: STATIC.serviceIPs,
  [STATIC.serviceNodePorts]: STATIC.noEndpointNodePorts,
  [STATIC.noEndpointNodePorts]: STATIC.serviceNodePorts,
};

export class NftRulesReader implements RulesReader {
  readonly #tables: readonly TableConfig[];
  readonly #query: NftQuery;

  constructor(tables: readonly TableConfig[], query: NftQuery = new ExecNftQuery()) {
    this.#tables = tables;
    this.#query = query;
  }

  /** The value of one element ("" for a set member), or undefined when it is not there. */
  async #element(cfg: TableConfig, set: string, key: string): Promise<string | undefined> {
    const text = await this.#query.text(["get", "element", cfg.family, cfg.table, set, `{ ${key} }`]);
    return text === undefined ? undefined : elementsOfText(text).get(key);
  }

  /**
   * The generation of endpoint maps the table serves from (names.ts): declarations only, listed
   * terse. While a restart moves to the other one both are there; generation 0 is then read.
   */
  async #generation(cfg: TableConfig): Promise<Generation> {
    const listed = await this.#query.json(["-t", "list", "maps", cfg.family]);
    const serving = generationsOf(listed === undefined ? [] : namesOf(listed, "map", cfg.table));
    return serving.size === 1 ? ([...serving][0] as Generation) : 0;
  }

  async read(service: LocalService): Promise<RulesReport> {
    const objects: { kind: string; name: string; lines: string[] }[] = [];
    const drift: { object: string; expected: string; found: string }[] = [];
    const show = (key: string, value: string | undefined) =>
      value === undefined ? `${key}: (missing)` : value === "" ? key : `${key} : ${value}`;
    for (const table of this.#tables) {
      const cfg = { ...table, generation: await this.#generation(table) };
      const where = `${cfg.family} ${cfg.table}`;
      const fragment = serviceFragment(service, cfg);
      for (const el of fragment.elements) {
        const found = await this.#element(cfg, el.set, el.key);
        objects.push({ kind: "nft element", name: `${where} ${el.set}`, lines: [show(el.key, found)] });
        if (found !== el.value)
          drift.push({
            object: `${where} ${el.set} ${el.key}`,
            expected: el.value || "(member)",
            found: found ?? "",
          });
        const other = EXCLUSIVE[el.set];
        if (other !== undefined) {
          const stale = await this.#element(cfg, other, el.key);
          if (stale !== undefined) {
            objects.push({ kind: "nft element", name: `${where} ${other}`, lines: [show(el.key, stale)] });
            drift.push({ object: `${where} ${other} ${el.key}`, expected: "", found: stale || "(member)" });
          }
        }
      }
      for (const group of fragment.groups) {
        // The endpoints keep their slots across changes: compare them as a set, and check that
        // no slot past the last is left behind.
        const found: string[] = [];
        for (let i = 0; i <= group.values.length; i++) {
          const value = await this.#element(cfg, group.set, `${group.prefix}${i}`);
          if (value !== undefined) found.push(value);
          if (i < group.values.length || value !== undefined)
            objects.push({
              kind: "nft element",
              name: `${where} ${group.set}`,
              lines: [show(`${group.prefix}${i}`, value)],
            });
        }
        const want = [...group.values].sort().join(", ");
        const have = [...found].sort().join(", ");
        if (want !== have)
          drift.push({ object: `${where} ${group.set} ${group.prefix}*`, expected: want, found: have });
      }
      const chains = [...fragment.chains, ...fragment.sharedChains].map((c) => c.name);
      if (chains.length > 0) {
        // Declarations only (`list chains`): listing rules would load every element of the table.
        const listed = await this.#query.json(["list", "chains", cfg.family]);
        const present = new Set(listed === undefined ? [] : namesOf(listed, "chain", cfg.table));
        for (const name of chains) {
          objects.push({
            kind: "nft chain",
            name: `${where} ${name}`,
            lines: [present.has(name) ? "present" : "(missing)"],
          });
          if (!present.has(name))
            drift.push({ object: `${where} chain ${name}`, expected: "present", found: "" });
        }
      }
    }
    return { backend: "nft", objects, drift };
  }
}

/** The names of the objects of one kind and table in a JSON listing. */
function namesOf(json: unknown, kind: "chain" | "map", table: string): string[] {
  const items = (json as { nftables?: unknown[] }).nftables ?? [];
  const out: string[] = [];
  for (const item of items) {
    const object = (item as Record<string, { name?: unknown; table?: unknown } | undefined>)[kind];
    if (object !== undefined && object.table === table && typeof object.name === "string")
      out.push(object.name);
  }
  return out;
}
