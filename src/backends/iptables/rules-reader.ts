// `kpng explain --rules iptables`: the chains and dispatch rules that implement one Service in
// kpng's iptables rules, read from `iptables-save -t nat` and `-t filter` (the only way iptables
// reads a table) and compared with what serviceRules writes for the brain's state of it. Only
// the Service's own chains and the shared chains' rules that name the Service are reported.

import type { FamilySettings } from "../../backend-core/family-settings.ts";
import { parseIptablesSave, type SavedTable } from "../../host/iptables-save.ts";
import type { IPFamily } from "../../model/kube.ts";
import { type LocalService, serviceFamily } from "../../model/local.ts";
import type { RulesReader, RulesReport } from "../../plugin/rules-reader.ts";
import { SHARED_CHAINS } from "./names.ts";
import { serviceRules } from "./render-service.ts";
import type { IptablesRunner } from "./runner.ts";

/**
 * A rule as a sorted list of its words, with iptables-save's spellings undone (the order of
 * matches, a probability's digits, REJECT's default type), so that the rule kpng writes and the
 * rule the kernel returns compare equal.
 */
function normalized(rule: string): string {
  return rule
    .replace(/"/g, "")
    .replace(/ --reject-with icmp6?-port-unreachable/, "")
    .replace(/--probability (\S+)/, (_, p: string) => `--probability ${Number(p)}`)
    .split(/\s+/)
    .filter((w) => w !== "")
    .sort()
    .join(" ");
}

/** The same rules, in any order. */
function sameSorted(a: readonly string[], b: readonly string[]): boolean {
  const x = a.map(normalized).sort();
  const y = b.map(normalized).sort();
  return x.length === y.length && x.every((r, i) => r === y[i]);
}

/** The chains every Service has rules in (rewritten on every sync). */
const SHARED_CHAIN_NAMES: ReadonlySet<string> = new Set([
  SHARED_CHAINS.services,
  SHARED_CHAINS.nodePorts,
  SHARED_CHAINS.firewall,
]);

export class IptablesRulesReader implements RulesReader {
  readonly #families: readonly FamilySettings[];
  readonly #runner: IptablesRunner;

  constructor(families: readonly FamilySettings[], runner: IptablesRunner) {
    this.#families = families;
    this.#runner = runner;
  }

  async #table(family: IPFamily, table: "nat" | "filter"): Promise<SavedTable | undefined> {
    return parseIptablesSave(await this.#runner.save(family, table)).get(table);
  }

  async read(service: LocalService): Promise<RulesReport> {
    const objects: { kind: string; name: string; lines: string[] }[] = [];
    const drift: { object: string; expected: string; found: string }[] = [];
    for (const cfg of this.#families) {
      const rules = serviceRules(service, cfg);
      const own = serviceFamily(service, cfg.family);
      if (own === undefined || rules.clusterIPs.length === 0) continue;
      const [nat, filter] = await Promise.all([
        this.#table(cfg.family, "nat"),
        this.#table(cfg.family, "filter"),
      ]);
      const tool = cfg.family === "IPv4" ? "iptables" : "ip6tables";
      // The service's own chains, rule for rule in order.
      for (const [chain, want] of rules.chains) {
        const have = (nat?.rules ?? []).filter((r) => r.chain === chain).map((r) => r.line);
        const exists = nat?.chains.has(chain) ?? false;
        objects.push({ kind: `${tool} chain`, name: `nat ${chain}`, lines: exists ? have : ["(missing)"] });
        if (!exists || have.map(normalized).join("\n") !== want.map(normalized).join("\n"))
          drift.push({
            object: `${tool} nat ${chain}`,
            expected: want.join(" ⏎ "),
            found: exists ? have.join(" ⏎ ") : "",
          });
      }
      // The shared chains' rules for this Service: those naming its addresses or its chains.
      const mine = (rule: string) =>
        rules.clusterIPs.some((ip) => rule.includes(` ${ip}/`)) ||
        [...own.externalIPs, ...own.loadBalancerIPs].some((ip) => rule.includes(` ${ip}/`)) ||
        [...rules.chains.keys()].some((c) => rule.endsWith(` ${c}`)) ||
        service.ports.some((p) => p.nodePort > 0 && rule.includes(`--dport ${p.nodePort} `));
      const shared: [string, SavedTable | undefined, readonly string[]][] = [
        ["nat", nat, [...rules.natServices, ...rules.natNodePorts]],
        [
          "filter",
          filter,
          [
            ...rules.filterServices,
            ...rules.filterNodePorts,
            ...rules.filterFirewall,
            // A known cluster IP on an unknown port is rejected (ruleset.ts).
            ...rules.clusterIPs.map(
              (ip) => `-A ${SHARED_CHAINS.services} -d ${ip}/${cfg.family === "IPv4" ? 32 : 128} -j REJECT`,
            ),
          ],
        ],
      ];
      for (const [name, table, want] of shared) {
        const have = (table?.rules ?? [])
          .filter((r) => SHARED_CHAIN_NAMES.has(r.chain) && mine(r.line))
          .map((r) => r.line);
        if (want.length === 0 && have.length === 0) continue;
        objects.push({ kind: `${tool} rules`, name: `${name} (dispatch)`, lines: have });
        if (!sameSorted(want, have))
          drift.push({
            object: `${tool} ${name} dispatch rules`,
            expected: want.join(" ⏎ "),
            found: have.join(" ⏎ "),
          });
      }
    }
    return { backend: "iptables", objects, drift };
  }
}
