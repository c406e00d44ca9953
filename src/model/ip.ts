// IP and CIDR checks shared by validation and the brain. node:net decides what an address is
// (strict dotted quads, no zone ids); ipaddr.js does the prefix arithmetic.

import { isIPv6 } from "node:net";
import ipaddr from "ipaddr.js";
import { ipv4Value } from "./ipv4.ts";
import type { IPFamily } from "./kube.ts";

// kpng's IP-family vocabulary: the Kubernetes family names everywhere, and nft's names for the
// table families only where nft text is written. iptables and conntrack pick their binary or
// flag from the Kubernetes name.

export const IP_FAMILIES: readonly IPFamily[] = ["IPv4", "IPv6"];

/** nft's address family of the table that holds one IP family's rules. */
export type NftFamily = "ip" | "ip6";

/** The IP family an nft table family programs. */
export function ipFamilyOfNft(family: NftFamily): IPFamily {
  return family === "ip" ? "IPv4" : "IPv6";
}

/** Bits of an address of the family: a host's prefix length. */
function addressBits(family: IPFamily): 32 | 128 {
  return family === "IPv4" ? 32 : 128;
}

/** A single address as a CIDR with its full prefix length, as iptables writes `-d`/`-s`. */
export function hostCIDR(ip: string): string {
  return `${ip}/${addressBits(familyOf(ip) ?? "IPv4")}`;
}

/** The family of a literal IP address, or undefined when the string is not one. */
export function familyOfAddress(text: string): IPFamily | undefined {
  if (ipv4Value(text) >= 0) return "IPv4";
  if (isIPv6(text) && !text.includes("%")) return "IPv6";
  return undefined;
}

/** The family of an address or a CIDR ("10.0.0.0/8"), or undefined when it is neither. */
export function familyOf(ipOrCidr: string): IPFamily | undefined {
  const slash = ipOrCidr.indexOf("/");
  return familyOfAddress(slash < 0 ? ipOrCidr : ipOrCidr.slice(0, slash));
}

/**
 * The one spelling of an address that the rest of kpng compares and keys by: IPv6 lower-case and
 * compressed as RFC 5952 writes it ("2001:DB8:0000::00C" → "2001:db8::c"); IPv4 as it is (node:net
 * accepts only plain dotted quads). Undefined when the string is not an address. Two spellings of
 * one address would otherwise be two endpoints.
 */
export function canonicalAddress(text: string): string | undefined {
  const family = familyOfAddress(text);
  if (family === "IPv4") return text;
  if (family === "IPv6") return ipaddr.IPv6.parse(text).toRFC5952String();
  return undefined;
}

interface Cidr {
  readonly family: IPFamily;
  /** Network address and prefix, host bits cleared: "10.0.0.0/8", "2001:db8::/32". */
  readonly text: string;
}

/** Parses "addr/prefix" (no surrounding whitespace); undefined when it is not a CIDR. */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf("/");
  if (slash < 0) return undefined;
  const address = text.slice(0, slash);
  const prefixText = text.slice(slash + 1);
  const family = familyOfAddress(address);
  if (family === undefined || !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  if (prefix > addressBits(family)) return undefined;
  const network =
    family === "IPv4"
      ? ipaddr.IPv4.networkAddressFromCIDR(`${address}/${prefix}`)
      : ipaddr.IPv6.networkAddressFromCIDR(`${address}/${prefix}`);
  return { family, text: `${network.toString()}/${prefix}` };
}

/** A dotted quad without leading zeros: already canonical. */
const OCTET = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
const CANONICAL_IPV4 = new RegExp(`^${OCTET}(?:\\.${OCTET}){3}$`);

/** Canonical address text (IPv6 compressed), the form the kernel tools print back. Throws when invalid. */
export function canonicalIP(ip: string): string {
  // Most addresses already are (validation canonicalizes them): one regular expression says so.
  if (CANONICAL_IPV4.test(ip)) return ip;
  return ipaddr.parse(ip).toString();
}

/** Canonical CIDR text with the host bits cleared; a bare address becomes /32 or /128. Throws when invalid. */
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

/** Whether the address lies in the CIDR (false for either being invalid, or of two families). */
export function cidrContains(cidr: string, ip: string): boolean {
  try {
    const addr = ipaddr.parse(ip);
    const range = ipaddr.parseCIDR(cidr);
    return addr.kind() === range[0].kind() && addr.match(range);
  } catch {
    return false;
  }
}
