// --service-cidrs: the cluster's Service IP ranges, for clusters that serve no ServiceCIDR API
// (or to pin them). A comma-separated list of CIDRs, IPv4 and/or IPv6, written with their host
// bits cleared as the API server requires of ServiceCIDRs, and never a default route (prefix 0).

import { parseCidr } from "../model/ip.ts";
import { defaultRouteReason } from "../model/validate-servicecidr.ts";
import { UsageError } from "./usage-error.ts";

export const SERVICE_CIDRS_FLAG = "--service-cidrs";

/** The ranges in the order given, each once; throws UsageError naming the flag and the bad entry. */
export function parseServiceCIDRsFlag(text: string): string[] {
  const entries = text.split(",").map((e) => e.trim());
  if (entries.every((e) => e === ""))
    throw new UsageError(`${SERVICE_CIDRS_FLAG}: expected at least one CIDR`);
  const out: string[] = [];
  for (const entry of entries) {
    if (entry === "") throw new UsageError(`${SERVICE_CIDRS_FLAG}: empty entry in ${JSON.stringify(text)}`);
    const cidr = parseCidr(entry);
    if (cidr === undefined)
      throw new UsageError(`${SERVICE_CIDRS_FLAG}: ${JSON.stringify(entry)} is not a CIDR`);
    if (cidr.text !== entry) {
      throw new UsageError(
        `${SERVICE_CIDRS_FLAG}: ${JSON.stringify(entry)} has host bits set (the network is ${cidr.text})`,
      );
    }
    const wholeFamily = defaultRouteReason(cidr);
    if (wholeFamily !== undefined) throw new UsageError(`${SERVICE_CIDRS_FLAG}: ${wholeFamily}`);
    if (!out.includes(entry)) out.push(entry);
  }
  return out;
}
