// The iptables backend's answer to "are my rules still there?", by contents: `iptables -F` or a
// firewall reload empties chains without deleting them. Between syncs each family's probe points
// are checked, each with one cheap call: a built-in chain still jumps to kpng's (`iptables -C`),
// a kpng chain that always holds rules still holds its first one (`iptables -S CHAIN 1`, which
// reads one chain, not the table).

import type { RulesProbe } from "../../backend-core/rules-probe.ts";
import type { IPFamily } from "../../model/kube.ts";
import type { IptablesRunner, Table } from "./runner.ts";

/** A chain that must hold `rule`, or (without one) hold at least one rule. */
export interface ProbePoint {
  readonly table: Table;
  readonly chain: string;
  readonly rule?: string;
}

export class IptablesRulesProbe implements RulesProbe {
  readonly #runner: IptablesRunner;
  readonly #points: (family: IPFamily) => readonly ProbePoint[];

  constructor(runner: IptablesRunner, points: (family: IPFamily) => readonly ProbePoint[]) {
    this.#runner = runner;
    this.#points = points;
  }

  async intact(family: string): Promise<boolean> {
    const f = family as IPFamily;
    for (const p of this.#points(f)) {
      const present =
        p.rule === undefined
          ? await this.#runner.hasRules(f, p.table, p.chain)
          : await this.#runner.hasRule(f, p.table, p.chain, p.rule);
      if (!present) return false;
    }
    return true;
  }
}
