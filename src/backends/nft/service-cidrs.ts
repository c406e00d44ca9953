// The cluster's Service IP ranges in one family's table: an interval set that the cluster-IPs
// check drops from (after rejecting unknown ports of allocated cluster IPs), so a packet to a
// Service address nobody holds never leaves the node. The set is rewritten whole, in one
// transaction, when the ranges change: the check only sees new connections, so established
// traffic to allocated addresses is never touched.

import { STATIC } from "./names.ts";
import type { NftOp } from "./ops.ts";

/** Operations that make the table's range set hold exactly `cidrs` (one family). */
export function serviceCIDROps(cidrs: readonly string[]): NftOp[] {
  const out: NftOp[] = [{ verb: "flush", kind: "set", name: STATIC.serviceCIDRs }];
  if (cidrs.length > 0) out.push({ verb: "add", kind: "element", set: STATIC.serviceCIDRs, elements: cidrs });
  return out;
}
