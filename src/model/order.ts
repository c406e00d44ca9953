// The one order of addresses and endpoints, used wherever a list of them is built or read back:
// IPv4 before IPv6, then by address value (so .9 comes before .10), then by port. The brain sorts
// with it, the watch API client restores it, and dumps print lists in it, so the same cluster
// gives the same lists (and the same backend rules) in-process and over the API.

import ipaddr from "ipaddr.js";
import { familyOfAddress } from "./ip.ts";

export function compareAddresses(a: string, b: string): number {
  if (a === b) return 0;
  const fa = familyOfAddress(a);
  const fb = familyOfAddress(b);
  if (fa === undefined || fb === undefined) {
    // Not an address (validation keeps these out of the model): after every address, by text.
    if (fa !== fb) return fa === undefined ? 1 : -1;
    return a < b ? -1 : 1;
  }
  if (fa !== fb) return fa === "IPv4" ? -1 : 1;
  if (fa === "IPv4") return ipv4Number(a) - ipv4Number(b);
  const pa = ipaddr.IPv6.parse(a).parts;
  const pb = ipaddr.IPv6.parse(b).parts;
  for (let i = 0; i < 8; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

export function compareEndpoints(
  a: { readonly ip: string; readonly port: number },
  b: { readonly ip: string; readonly port: number },
): number {
  return compareAddresses(a.ip, b.ip) || a.port - b.port;
}

function ipv4Number(ip: string): number {
  let n = 0;
  for (const octet of ip.split(".")) n = n * 256 + Number(octet);
  return n;
}
