// Which iptables variant to use when the flag says "auto": the one the host already uses, as
// kube-proxy's images decide it: legacy when the legacy tables hold more Kubernetes (or kpng)
// rules than the nft ones, else nft. The two are never mixed in one run.

import type { IPFamily } from "../../model/kube.ts";
import type { IptablesRunner, Variant } from "./runner.ts";

const KUBE_RULE = /^(?::|-A )(KUBE|KPNG)-/;

export function countKubeLines(saved: string): number {
  let n = 0;
  for (const line of saved.split("\n")) if (KUBE_RULE.test(line)) n++;
  return n;
}

/** Pure decision from the line counts of each variant. */
export function pickVariant(counts: Readonly<Record<Variant, number>>): Variant {
  return counts.legacy > counts.nft ? "legacy" : "nft";
}

async function count(runner: IptablesRunner): Promise<number> {
  let n = 0;
  for (const family of ["IPv4", "IPv6"] as IPFamily[]) {
    for (const table of ["nat", "filter", "mangle"] as const) {
      // A variant whose tables cannot be read holds no rules.
      n += countKubeLines(await runner.save(family, table).catch(() => ""));
    }
  }
  return n;
}

export async function detectVariant(runners: Readonly<Record<Variant, IptablesRunner>>): Promise<Variant> {
  return pickVariant({ nft: await count(runners.nft), legacy: await count(runners.legacy) });
}
