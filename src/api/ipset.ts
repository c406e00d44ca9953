// kpng's IPSet: addresses split by family, each list sorted and without duplicates.

import type { IPSet } from "./gen/api/localv1/api.ts";

export function toIPSet(ips: Iterable<string>): IPSet {
  const v4 = new Set<string>();
  const v6 = new Set<string>();
  for (const ip of ips) (ip.includes(":") ? v6 : v4).add(ip);
  return { V4: [...v4].sort(), V6: [...v6].sort() };
}

export function ipSetAll(set: IPSet | undefined): string[] {
  return set === undefined ? [] : [...set.V4, ...set.V6];
}
