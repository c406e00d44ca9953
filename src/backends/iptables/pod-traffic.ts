// How an iptables rule tells pod traffic apart (kube-proxy's local traffic detector): by source
// in a pod CIDR, or by the interface the packet came in on.

import type { FamilySettings } from "../../backend-core/family-settings.ts";

/** One match per rule that catches traffic from pods; none when pods are not told apart. */
export function podTrafficMatches(cfg: FamilySettings): string[] {
  if (cfg.podInterface !== undefined) {
    const { name, prefix } = cfg.podInterface;
    return [`-i ${name}${prefix ? "+" : ""}`];
  }
  return cfg.podCIDRs.map((cidr) => `-s ${cidr}`);
}
