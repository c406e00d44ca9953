// The node's addresses that serve NodePorts to its own sockets, per IP family: those in the
// NodePort CIDRs. Loopback addresses only as kube-proxy's iptables mode allows: 127.0.0.1 with
// localhost NodePorts on and inside the NodePort CIDRs; never ::1.

import ipaddr from "ipaddr.js";
import { cidrContains, familyOf } from "../model/ip.ts";
import type { IPFamily } from "../model/kube.ts";

const LOCALHOST = "127.0.0.1";
const isLoopback = (ip: string) => ipaddr.parse(ip).range() === "loopback";
const inAny = (ip: string, cidrs: readonly string[]) => cidrs.some((c) => cidrContains(c, ip));

export function nodePortAddresses(
  hostIPs: readonly string[],
  nodePortCIDRs: readonly string[],
  localhostNodePorts: boolean,
): Record<IPFamily, string[]> {
  const out: Record<IPFamily, string[]> = { IPv4: [], IPv6: [] };
  for (const ip of hostIPs) {
    const family = familyOf(ip);
    if (family !== undefined && !isLoopback(ip) && inAny(ip, nodePortCIDRs)) out[family].push(ip);
  }
  if (localhostNodePorts && inAny(LOCALHOST, nodePortCIDRs)) out.IPv4.push(LOCALHOST);
  return out;
}
