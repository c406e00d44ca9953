// How an nft rule tells pod traffic apart (kube-proxy's local traffic detector): by source in
// the pod CIDRs set, or by the interface the packet came in on.

import type { TableConfig } from "./fragment.ts";
import { STATIC } from "./names.ts";

/**
 * The match of traffic from pods, or with `negate` of traffic not from pods; undefined when
 * pods are not told apart (no --cluster-cidr, or a Node without podCIDRs in NodeCIDR mode).
 */
export function podTraffic(cfg: TableConfig, negate: boolean): string | undefined {
  const not = negate ? "!= " : "";
  if (cfg.podInterface !== undefined) {
    const { name, prefix } = cfg.podInterface;
    return `iifname ${not}"${name}${prefix ? "*" : ""}"`;
  }
  return cfg.podCIDRs.length > 0 ? `${cfg.family} saddr ${not}@${STATIC.podCIDRs}` : undefined;
}
