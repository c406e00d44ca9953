// The node's primary addresses, read with `ip -j` (argv array, no shell, with a deadline): those of
// the interfaces holding the default routes, else every global non-loopback address.

import { familyOf } from "./addresses.ts";
import { exec } from "./runner.ts";

export interface InterfaceAddresses {
  readonly ifname: string;
  readonly addresses: readonly { readonly ip: string; readonly scope: string }[];
}

/** Pure, so the rule is tested without a host. */
export function primaryAddresses(
  defaultIfs: readonly string[],
  ifs: readonly InterfaceAddresses[],
): string[] {
  const global = (i: InterfaceAddresses) =>
    i.ifname === "lo" ? [] : i.addresses.filter((a) => a.scope === "global").map((a) => a.ip);
  const out: string[] = [];
  for (const fam of ["ipv4", "ipv6"] as const) {
    const onDefault = ifs.filter((i) => defaultIfs.includes(i.ifname)).flatMap(global);
    const pick = onDefault.filter((ip) => familyOf(ip) === fam);
    out.push(...(pick.length > 0 ? pick : ifs.flatMap(global).filter((ip) => familyOf(ip) === fam)));
  }
  return out;
}

function records(x: unknown): Record<string, unknown>[] {
  return Array.isArray(x)
    ? x.filter((r): r is Record<string, unknown> => typeof r === "object" && r !== null)
    : [];
}

async function ipJson(args: readonly string[]): Promise<Record<string, unknown>[]> {
  const r = await exec(["ip", "-j", ...args], "", 10_000);
  if (r.code !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr.trim()}`);
  const text = r.stdout.trim();
  return records(text === "" ? [] : (JSON.parse(text) as unknown));
}

export async function nodePrimaryAddresses(): Promise<string[]> {
  const defaults: string[] = [];
  for (const fam of ["-4", "-6"]) {
    for (const r of await ipJson([fam, "route", "show", "default"]))
      if (typeof r.dev === "string") defaults.push(r.dev);
  }
  const ifs = (await ipJson(["addr", "show"])).map((i) => ({
    ifname: String(i.ifname),
    addresses: records(i.addr_info).map((a) => ({ ip: String(a.local), scope: String(a.scope) })),
  }));
  return primaryAddresses(defaults, ifs);
}
