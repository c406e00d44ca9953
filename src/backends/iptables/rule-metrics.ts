// kube-proxy's iptables rule metrics: how many rules kpng owns in each table of a family after a
// sync, how many the last sync wrote, and the partial syncs whose restore failed (each is
// followed by a full one).

import type { IPFamily } from "../../model/kube.ts";
import { counter, gauge } from "../../observability/metrics.ts";

const rulesTotal = gauge(
  "kubeproxy_sync_proxy_rules_iptables_total",
  "Rules kpng owns in the table (its own chains) after the last successful sync.",
  ["table", "ip_family"],
);
const rulesLast = gauge(
  "kubeproxy_sync_proxy_rules_iptables_last",
  "Rules the last successful sync wrote to the table.",
  ["table", "ip_family"],
);
const partialRestoreFailures = counter(
  "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
  "Partial syncs whose restore failed; the next sync is a full one.",
  ["ip_family"],
);

const TABLES = ["nat", "filter"] as const;
type Table = (typeof TABLES)[number];

/** Rule lines (`-A`) per table in restore inputs (`*nat … COMMIT`). */
export function rulesWritten(inputs: readonly string[]): Record<Table, number> {
  const out = { nat: 0, filter: 0 };
  for (const input of inputs) {
    const table = input.slice(1, input.indexOf("\n"));
    if (table !== "nat" && table !== "filter") continue;
    let at = input.indexOf("\n-A ");
    while (at >= 0) {
      out[table]++;
      at = input.indexOf("\n-A ", at + 4);
    }
  }
  return out;
}

/** The series of one family, at zero until its first sync. */
export function zeroRuleMetrics(family: IPFamily): void {
  for (const table of TABLES) {
    rulesTotal.set({ table, ip_family: family }, 0);
    rulesLast.set({ table, ip_family: family }, 0);
  }
  partialRestoreFailures.inc({ ip_family: family }, 0);
}

export function recordRules(
  family: IPFamily,
  total: Record<Table, number>,
  written: Record<Table, number>,
): void {
  for (const table of TABLES) {
    rulesTotal.set({ table, ip_family: family }, total[table]);
    rulesLast.set({ table, ip_family: family }, written[table]);
  }
}

export function partialRestoreFailed(family: IPFamily): void {
  partialRestoreFailures.inc({ ip_family: family });
}
