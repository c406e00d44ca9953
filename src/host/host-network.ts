// The node's own addresses, read with `ip -j` (argv array, no shell). The "primary" addresses are
// those of the interfaces holding the default routes, else every global non-loopback address.

import { ofFamily } from "../model/local.ts";
import { execVia, type SmallSpawner } from "./small-spawner.ts";

interface InterfaceAddresses {
  readonly ifname: string;
  readonly addresses: readonly { readonly ip: string; readonly scope: string }[];
}

export interface HostNetwork {
  /** Interfaces holding a default route (both families). */
  defaultRouteInterfaces(): Promise<string[]>;
  interfaces(): Promise<InterfaceAddresses[]>;
}

/** The primary addresses: pure, so the rule is tested without a host. */
export function primaryAddresses(
  defaultIfs: readonly string[],
  ifs: readonly InterfaceAddresses[],
): string[] {
  const global = (i: InterfaceAddresses) =>
    i.ifname === "lo" ? [] : i.addresses.filter((a) => a.scope === "global").map((a) => a.ip);
  const out: string[] = [];
  for (const fam of ["IPv4", "IPv6"] as const) {
    const onDefault = ifs.filter((i) => defaultIfs.includes(i.ifname)).flatMap(global);
    const pick = ofFamily(onDefault, fam);
    out.push(...(pick.length > 0 ? pick : ofFamily(ifs.flatMap(global), fam)));
  }
  return out;
}

/** The programs reading the node's addresses start (the image must contain them). */
export const HOST_NETWORK_BINARIES: readonly string[] = ["ip"];

const IP_TIMEOUT_MS = 10_000;

async function ipJson(args: readonly string[], spawner: SmallSpawner | undefined): Promise<unknown> {
  // A deadline, as for every external call: `ip` answers in milliseconds when all is well.
  const r = await execVia(spawner, ["ip", "-j", ...args], { timeoutMs: IP_TIMEOUT_MS });
  if (r.code !== 0 || r.signal !== null)
    throw new Error(`ip ${args.join(" ")}: ${r.stderr.trim() || r.signal}`);
  const text = r.stdout.trim();
  return text === "" ? [] : (JSON.parse(text) as unknown);
}

function records(x: unknown): Record<string, unknown>[] {
  return Array.isArray(x)
    ? x.filter((r): r is Record<string, unknown> => typeof r === "object" && r !== null)
    : [];
}

export class IpCommandHost implements HostNetwork {
  /**
   * Starts `ip`: from kpng, each start would block kpng for as long as a fork of it takes, which
   * grows with its memory, and the addresses are read again after every address event.
   */
  readonly #spawner: SmallSpawner | undefined;

  constructor(spawner?: SmallSpawner) {
    this.#spawner = spawner;
  }

  async defaultRouteInterfaces(): Promise<string[]> {
    const out: string[] = [];
    for (const fam of ["-4", "-6"]) {
      for (const r of records(await ipJson([fam, "route", "show", "default"], this.#spawner))) {
        if (typeof r.dev === "string") out.push(r.dev);
      }
    }
    return out;
  }

  /** The next hops of the default routes (both families); none for a route without a gateway. */
  async defaultGateways(): Promise<string[]> {
    const out: string[] = [];
    for (const fam of ["-4", "-6"]) {
      for (const r of records(await ipJson([fam, "route", "show", "default"], this.#spawner))) {
        if (typeof r.gateway === "string") out.push(r.gateway);
      }
    }
    return out;
  }

  async interfaces(): Promise<InterfaceAddresses[]> {
    return records(await ipJson(["addr", "show"], this.#spawner)).map((i) => ({
      ifname: String(i.ifname),
      addresses: records(i.addr_info).map((a) => ({ ip: String(a.local), scope: String(a.scope) })),
    }));
  }
}
