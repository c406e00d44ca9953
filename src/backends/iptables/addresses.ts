// The iptables tools' family names, and addresses as iptables writes them.

import { familyOf } from "../../model/ip.ts";
import type { IPFamily } from "../../model/kube.ts";

/** iptables-save / ip6tables-save: one family each. */
export type IpFamily = "ipv4" | "ipv6";

/** The IP family a tools family programs. */
export function ipFamilyOfTools(family: IpFamily): IPFamily {
  return family === "ipv4" ? "IPv4" : "IPv6";
}

/** A single address as iptables writes it in `-d`/`-s`: with its full prefix length. */
export function hostCIDR(ip: string): string {
  return `${ip}/${familyOf(ip) === "IPv4" ? 32 : 128}`;
}
