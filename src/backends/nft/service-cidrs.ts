// The cluster's Service IP ranges in one family's table: an interval set that the cluster-IPs
// check drops from (after rejecting unknown ports of allocated cluster IPs), so a packet to a
// Service address nobody holds never leaves the node. The set is rewritten whole, in one
// transaction, when the ranges change: the check only sees new connections, so established
// traffic to allocated addresses is never touched.

import { ipFamilyOf } from "../../model/local.ts";
import type { NftFamily } from "./fragment.ts";
import { STATIC } from "./names.ts";

/** The ranges of one table's family, in the order the local state gives them. */
export function serviceCIDRsOfFamily(cidrs: readonly string[], family: NftFamily): string[] {
  const wanted = family === "ip" ? "IPv4" : "IPv6";
  return cidrs.filter((c) => ipFamilyOf(c) === wanted);
}

/** Statements that make the table's range set hold exactly `cidrs` (one family). */
export function serviceCIDRStatements(table: string, cidrs: readonly string[]): string[] {
  const out = [`flush set ${table} ${STATIC.serviceCIDRs}`];
  if (cidrs.length > 0) out.push(`add element ${table} ${STATIC.serviceCIDRs} { ${cidrs.join(", ")} }`);
  return out;
}
