// Address helpers for the iptables rules: family tests, canonical text and CIDR containment,
// built on ipaddr.js.

import ipaddr from "ipaddr.js";

export type IpFamily = "ipv4" | "ipv6";

export function familyOf(ipOrCidr: string): IpFamily {
  return ipOrCidr.includes(":") ? "ipv6" : "ipv4";
}

export function canonicalIP(ip: string): string {
  return ipaddr.parse(ip).toString();
}

/** Canonical CIDR with the host bits cleared; a bare address becomes /32 or /128. Throws when invalid. */
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

/** A single address as iptables writes it in `-d`/`-s`: with its full prefix length. */
export function hostCIDR(ip: string): string {
  return `${ip}/${familyOf(ip) === "ipv4" ? 32 : 128}`;
}

/** `10.0.0.1:80` or `[2001:db8::1]:80`, as `--to-destination` wants it. */
export function dnatTarget(ip: string, port: number): string {
  return ip.includes(":") ? `[${ip}]:${port}` : `${ip}:${port}`;
}
