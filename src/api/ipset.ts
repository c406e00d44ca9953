// kpng's IPSet: addresses split by family, each list in address order and without duplicates.

import { familyOf } from "../model/ip.ts";
import { compareAddresses } from "../model/order.ts";
import type { IPSet } from "./gen/api/localv1/api.ts";

export function toIPSet(ips: Iterable<string>): IPSet {
  const v4 = new Set<string>();
  const v6 = new Set<string>();
  for (const ip of ips) (familyOf(ip) === "IPv6" ? v6 : v4).add(ip);
  return { V4: [...v4].sort(compareAddresses), V6: [...v6].sort(compareAddresses) };
}

export function ipSetAll(set: IPSet | undefined): string[] {
  return set === undefined ? [] : [...set.V4, ...set.V6];
}
