// Small pure helpers for addresses: family tests, canonical text (as nft prints it) and CIDR
// containment, built on ipaddr.js.

import ipaddr from "ipaddr.js";
import type { IPFamily } from "../../model/kube.ts";
import { endpointString } from "../../model/local.ts";
import type { NftFamily } from "./fragment.ts";

/** The nft table family that holds rules for an IP family. */
export const NFT_FAMILY: Readonly<Record<IPFamily, NftFamily>> = { IPv4: "ip", IPv6: "ip6" };

/** The IP family an nft table family programs. */
export function ipFamilyOfTable(family: NftFamily): IPFamily {
  return family === "ip" ? "IPv4" : "IPv6";
}

/** Canonical address text (IPv6 compressed), the form nft prints back. */
export function canonicalIP(ip: string): string {
  return ipaddr.parse(ip).toString();
}

/** Canonical CIDR text with the host bits cleared, or throws with a clear message. */
export function canonicalCIDR(cidr: string): string {
  const trimmed = cidr.trim();
  if (!trimmed.includes("/")) {
    const ip = ipaddr.parse(trimmed);
    return `${ip.toString()}/${ip.kind() === "ipv6" ? 128 : 32}`;
  }
  if (!ipaddr.isValidCIDR(trimmed)) throw new Error(`invalid CIDR "${cidr}"`);
  const [addr, len] = ipaddr.parseCIDR(trimmed);
  const bytes = addr.toByteArray();
  for (let bit = len; bit < bytes.length * 8; bit++) {
    const byte = bit >> 3;
    bytes[byte] = (bytes[byte] ?? 0) & ~(0x80 >> (bit & 7));
  }
  return `${ipaddr.fromByteArray(bytes).toString()}/${len}`;
}

export function cidrContains(cidr: string, ip: string): boolean {
  try {
    const addr = ipaddr.parse(ip);
    const range = ipaddr.parseCIDR(cidr);
    return addr.kind() === range[0].kind() && addr.match(range);
  } catch {
    return false;
  }
}

/** `10.0.0.1:80` or `[2001:db8::1]:80`, as `dnat to` wants it. */
export function dnatTarget(ip: string, port: number): string {
  return endpointString({ ip, port });
}
