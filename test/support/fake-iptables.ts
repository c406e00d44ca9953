// An in-memory iptables for tests. It applies `iptables-restore --noflush` input the way the real
// one does: a declared chain is created or flushed, `-A`/`-I`/`-D`/`-X` edit the table, and each
// table's COMMIT applies completely or not at all. It fails like the real one on a jump to a
// missing chain, a `-D` of a missing rule, and a `-X` of a missing or still-referenced chain.

import {
  IptablesError,
  type IptablesRunner,
  type Table,
  type Variant,
} from "../../src/backends/iptables/runner.ts";
import type { IPFamily } from "../../src/model/kube.ts";

const BUILTIN: Record<Table, readonly string[]> = {
  nat: ["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"],
  filter: ["INPUT", "FORWARD", "OUTPUT"],
  mangle: ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"],
};
const TERMINAL = new Set(["ACCEPT", "DROP", "REJECT", "RETURN", "DNAT", "MARK", "MASQUERADE"]);

type Chains = Map<string, string[]>;

function emptyTable(table: Table): Chains {
  return new Map(BUILTIN[table].map((c) => [c, []]));
}

function target(spec: string): string | undefined {
  return /(?:^|\s)-[jg] (\S+)/.exec(spec)?.[1];
}

export class FakeIptables implements IptablesRunner {
  readonly variant: Variant;
  readonly #tables = new Map<string, Chains>();
  /** Every restore input applied successfully, in order. */
  readonly restores: { family: IPFamily; text: string }[] = [];
  /** Fails the next restores with this message. */
  failNext = 0;
  /** Fails every restore of a family while it returns true for the input. */
  failWhile: ((family: IPFamily, text: string) => boolean) | undefined;
  /** Restores never return while set (as a hung iptables-restore). */
  hangRestores = false;
  /** Chain checks never return while set. */
  hangChecks = false;
  /** Chain checks run (hasRules, hasRule). */
  checks = 0;
  /** Packet counters by `family/table/-A CHAIN spec`; a chain declared in a restore restarts at 0. */
  readonly packets = new Map<string, number>();

  constructor(variant: Variant = "nft") {
    this.variant = variant;
  }

  #table(family: IPFamily, table: Table): Chains {
    const key = `${family}/${table}`;
    let t = this.#tables.get(key);
    if (!t) {
      t = emptyTable(table);
      this.#tables.set(key, t);
    }
    return t;
  }

  /** The rule specs of a chain (without `-A NAME`), or undefined when it does not exist. */
  rules(family: IPFamily, table: Table, chain: string): string[] | undefined {
    return this.#table(family, table).get(chain);
  }

  chains(family: IPFamily, table: Table): string[] {
    return [...this.#table(family, table).keys()];
  }

  /** Runs commands as `iptables -t table …` would, without checks (to set up foreign rules). */
  edit(family: IPFamily, table: Table, fn: (chains: Chains) => void): void {
    fn(this.#table(family, table));
  }

  async restore(family: IPFamily, text: string, options: { readonly test?: boolean } = {}): Promise<void> {
    if (this.hangRestores) await new Promise(() => {});
    if (this.failNext > 0) {
      this.failNext--;
      throw new IptablesError("iptables-restore failed: injected", "injected failure");
    }
    if (this.failWhile?.(family, text))
      throw new IptablesError("iptables-restore failed: injected", "injected failure");
    const staged = new Map<string, Chains>();
    const flushed: string[] = [];
    let current: Chains | undefined;
    let name: Table | undefined;
    const fail = (msg: string): never => {
      throw new IptablesError(`iptables-restore failed: ${msg}`, msg);
    };
    for (const raw of text.split("\n")) {
      const line = raw.trim();
      if (line === "" || line.startsWith("#")) continue;
      if (line.startsWith("*")) {
        name = line.slice(1) as Table;
        current = new Map([...this.#table(family, name)].map(([k, v]) => [k, [...v]]));
        continue;
      }
      if (current === undefined || name === undefined) fail(`line outside a table: ${line}`);
      const t = current as Chains;
      if (line === "COMMIT") {
        for (const [chain, rules] of t)
          for (const r of rules) {
            const tg = target(r);
            if (tg !== undefined && !TERMINAL.has(tg) && !t.has(tg))
              fail(`${chain}: jump to missing chain ${tg}`);
          }
        staged.set(`${family}/${name}`, t);
        current = undefined;
        continue;
      }
      if (line.startsWith(":")) {
        const chain = line.slice(1).split(" ")[0] ?? "";
        t.set(chain, []);
        flushed.push(`${family}/${name}/-A ${chain} `);
        continue;
      }
      const [op = "", chain = "", ...rest] = line.split(" ");
      const rules = t.get(chain);
      if (rules === undefined) fail(`${op} on missing chain ${chain}`);
      const list = rules as string[];
      if (op === "-A") list.push(rest.join(" "));
      else if (op === "-I") {
        const pos = Number(rest[0]);
        list.splice(pos - 1, 0, rest.slice(1).join(" "));
      } else if (op === "-D") {
        const i = list.indexOf(rest.join(" "));
        if (i < 0) fail(`-D ${chain}: no such rule`);
        list.splice(i, 1);
      } else if (op === "-X") {
        for (const [other, rs] of t)
          if (other !== chain && rs.some((r) => target(r) === chain))
            fail(`CHAIN_DEL failed (Device or resource busy): chain ${chain}, still referenced by ${other}`);
        if ((list as string[]).length > 0) fail(`-X ${chain}: not empty`);
        t.delete(chain);
      } else fail(`unknown command ${line}`);
    }
    if (current !== undefined) fail("missing COMMIT");
    if (options.test) return;
    for (const [key, t] of staged) this.#tables.set(key, t);
    for (const key of this.packets.keys())
      if (flushed.some((f) => key.startsWith(f))) this.packets.delete(key);
    this.restores.push({ family, text });
  }

  async save(family: IPFamily, table: Table): Promise<string> {
    const t = this.#table(family, table);
    const lines = [`*${table}`];
    for (const c of t.keys()) lines.push(BUILTIN[table].includes(c) ? `:${c} ACCEPT [0:0]` : `:${c} - [0:0]`);
    for (const [c, rules] of t) for (const r of rules) lines.push(`-A ${c} ${r}`);
    lines.push("COMMIT");
    return `${lines.join("\n")}\n`;
  }

  async rulesWithCounters(family: IPFamily, table: Table, chain: string): Promise<string> {
    const rules = this.#table(family, table).get(chain);
    if (rules === undefined) return "";
    return rules
      .map((r) => `-A ${chain} ${r} -c ${this.packets.get(`${family}/${table}/-A ${chain} ${r}`) ?? 0} 0\n`)
      .join("");
  }

  async chainExists(family: IPFamily, table: Table, chain: string): Promise<boolean> {
    return this.#table(family, table).has(chain);
  }

  async hasRules(family: IPFamily, table: Table, chain: string): Promise<boolean> {
    this.checks++;
    if (this.hangChecks) await new Promise(() => {});
    return (this.#table(family, table).get(chain)?.length ?? 0) > 0;
  }

  async hasRule(family: IPFamily, table: Table, chain: string, spec: string): Promise<boolean> {
    this.checks++;
    if (this.hangChecks) await new Promise(() => {});
    return this.#table(family, table).get(chain)?.includes(spec) ?? false;
  }
}
