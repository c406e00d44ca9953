// Where healthCheckNodePort servers listen: the node's addresses that accept NodePort traffic.
// A CIDR covering a whole family (0.0.0.0/0, ::/0) means every address of it.

import { cidrContains, familyOf } from "../model/ip.ts";

export function healthCheckAddresses(nodePortCIDRs: readonly string[], hostIPs: readonly string[]): string[] {
  const out = new Set<string>();
  for (const cidr of nodePortCIDRs) {
    if (cidr === "0.0.0.0/0") out.add("0.0.0.0");
    else if (cidr === "::/0") out.add("::");
  }
  for (const ip of hostIPs) {
    const wildcard = familyOf(ip) === "IPv6" ? "::" : "0.0.0.0";
    if (!out.has(wildcard) && nodePortCIDRs.some((c) => cidrContains(c, ip))) out.add(ip);
  }
  return [...out];
}
