// The one order of addresses and endpoints, used wherever a list of them is built or read back:
// IPv4 before IPv6, then by address value (so .9 comes before .10), then by port. The brain sorts
// with it, the watch API client restores it, and dumps print lists in it, so the same cluster
// gives the same lists (and the same backend rules) in-process and over the API.

import ipaddr from "ipaddr.js";
import { familyOfAddress } from "./ip.ts";
import { ipv4Value } from "./ipv4.ts";
import type { SliceEndpoint } from "./kube.ts";
import { firstAddress } from "./slice-endpoint.ts";

export function compareAddresses(a: string, b: string): number {
  if (a === b) return 0;
  // Sorting a service's endpoints compares IPv4 addresses most of the time: read them without
  // regular expressions or splitting (this comparison was a tenth of a 100k-Service first load).
  const va = ipv4Value(a);
  const vb = ipv4Value(b);
  if (va >= 0 && vb >= 0) return va - vb;
  const fa = va >= 0 ? "IPv4" : familyOfAddress(a);
  const fb = vb >= 0 ? "IPv4" : familyOfAddress(b);
  if (fa === undefined || fb === undefined) {
    // Not an address (validation keeps these out of the model): after every address, by text.
    if (fa !== fb) return fa === undefined ? 1 : -1;
    return a < b ? -1 : 1;
  }
  if (fa !== fb) return fa === "IPv4" ? -1 : 1;
  const pa = ipaddr.IPv6.parse(a).parts;
  const pb = ipaddr.IPv6.parse(b).parts;
  for (let i = 0; i < 8; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** What the order of endpoints reads of one. */
interface AddressAndPort {
  readonly ip: string;
  readonly port: number;
}

export function compareEndpoints(a: AddressAndPort, b: AddressAndPort): number {
  return compareAddresses(a.ip, b.ip) || a.port - b.port;
}

/**
 * Whether `list` is in compareEndpoints order with no ip:port twice. Each IPv4 address is read
 * once, where comparing neighbours would read each twice: slices usually arrive in order, and
 * this check is all the sorting a million endpoints then cost.
 */
export function inStrictEndpointOrder(list: readonly AddressAndPort[]): boolean {
  let before = list.length > 1 ? ipv4Value((list[0] as AddressAndPort).ip) : -1;
  for (let i = 1; i < list.length; i++) {
    const a = list[i - 1] as AddressAndPort;
    const b = list[i] as AddressAndPort;
    const value = ipv4Value(b.ip);
    const order = before >= 0 && value >= 0 ? value - before || b.port - a.port : compareEndpoints(b, a);
    if (order <= 0) return false;
    before = value;
  }
  return true;
}

/**
 * Whether every endpoint of a slice has an address and their first addresses are in the one
 * order, none twice: the endpoints of each of the slice's ports are then in order without
 * sorting. Slices usually list their endpoints so.
 */
export function inStrictAddressOrder(endpoints: readonly SliceEndpoint[]): boolean {
  let before: string | undefined;
  let beforeValue = -1;
  for (const ep of endpoints) {
    const ip = firstAddress(ep);
    if (ip === undefined) return false;
    const value = ipv4Value(ip);
    if (before !== undefined) {
      const order = value >= 0 && beforeValue >= 0 ? value - beforeValue : compareAddresses(ip, before);
      if (order <= 0) return false;
    }
    before = ip;
    beforeValue = value;
  }
  return true;
}
