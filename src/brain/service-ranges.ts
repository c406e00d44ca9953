// The cluster's Service IP ranges as one list: ServiceCIDR objects may repeat or nest ranges
// (a range is often widened by adding a larger one before the old one is deleted), and a
// backend wants each address covered once, in a stable order.

import ipaddr from "ipaddr.js";
import { parseCidr } from "../model/ip.ts";

interface Range {
  readonly text: string;
  readonly family: 4 | 6;
  readonly address: ipaddr.IPv4 | ipaddr.IPv6;
  readonly prefix: number;
  readonly bytes: readonly number[];
}

function toRange(text: string): Range | undefined {
  const cidr = parseCidr(text);
  if (cidr === undefined) return undefined;
  const [address, prefix] = ipaddr.parseCIDR(cidr.text);
  return {
    text: cidr.text,
    family: cidr.family === "IPv4" ? 4 : 6,
    address,
    prefix,
    bytes: address.toByteArray(),
  };
}

function compare(a: Range, b: Range): number {
  if (a.family !== b.family) return a.family - b.family;
  for (let i = 0; i < a.bytes.length; i++) {
    const d = (a.bytes[i] ?? 0) - (b.bytes[i] ?? 0);
    if (d !== 0) return d;
  }
  return a.prefix - b.prefix;
}

/**
 * Every range once, IPv4 first then by address; a range inside another is left out. Text that is
 * not a CIDR is ignored (inputs were validated).
 */
export function mergeServiceRanges(cidrs: Iterable<string>): string[] {
  const ranges: Range[] = [];
  for (const text of new Set(cidrs)) {
    const r = toRange(text);
    if (r !== undefined) ranges.push(r);
  }
  // Sorted by address then prefix, a range that covers others comes right before them.
  ranges.sort(compare);
  const out: Range[] = [];
  for (const r of ranges) {
    const last = out.at(-1);
    if (last !== undefined && last.family === r.family && r.address.match(last.address, last.prefix))
      continue;
    out.push(r);
  }
  return out.map((r) => r.text);
}
