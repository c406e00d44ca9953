// The cluster's Service IP ranges in one family's table: an interval set that the cluster-IPs
// check drops from (after rejecting unknown ports of allocated cluster IPs), so a packet to a
// Service address nobody holds never leaves the node. The set is rewritten whole, in one
// transaction, when the ranges change: the check only sees new connections, so established
// traffic to allocated addresses is never touched.

import { ipFamilyOfNft, type NftFamily } from "../../model/ip.ts";
import { ofFamily } from "../../model/local.ts";
import { STATIC } from "./names.ts";
import type { NftOp } from "./ops.ts";

/** The ranges of one table's family, in the order the local state gives them. */
export function serviceCIDRsOfFamily(cidrs: readonly string[], family: NftFamily): readonly string[] {
  return ofFamily(cidrs, ipFamilyOfNft(family));
}

/** Operations that make the table's range set hold exactly `cidrs` (one family). */
export function serviceCIDROps(cidrs: readonly string[]): NftOp[] {
  const out: NftOp[] = [{ verb: "flush", kind: "set", name: STATIC.serviceCIDRs }];
  if (cidrs.length > 0) out.push({ verb: "add", kind: "element", set: STATIC.serviceCIDRs, elements: cidrs });
  return out;
}
