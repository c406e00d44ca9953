// The probe contract: how the sync loop notices that another program deleted or flushed the
// proxy's rules (`nft flush ruleset`, `nft flush table`, an `iptables -F`, a firewall reload)
// and rewrites them at once rather than at the next periodic resync. Each backend answers for
// one family with a cheap look at the contents of the few objects it always fills: not their
// declarations only (a flushed chain is still declared), and never a listing that grows with the
// number of Services (at 100k Services that takes minutes and the probe runs every second).

import { counter } from "../observability/metrics.ts";

export interface RulesProbe {
  /** True when the family's rules are in place; rejects when it cannot tell. */
  intact(family: string): Promise<boolean>;
}

export const rulesRepairs = counter(
  "kpng_rules_repairs_total",
  "Times the proxy's rules were found deleted or flushed by someone else and rewritten.",
  ["backend", "family"],
);

export const probeFailures = counter(
  "kpng_rules_probe_failures_total",
  "Checks of the proxy's rules that could not run (timeout, tool error).",
  ["backend", "family"],
);
