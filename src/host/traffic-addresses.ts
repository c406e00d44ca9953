// The addresses every kernel backend's rules depend on beyond the local state: which of the
// node's addresses take NodePort traffic (--nodeport-addresses) and which sources are pods
// (--cluster-cidr), with the same flags, defaults and checks for every backend.

import type { Command } from "commander";
import { z } from "zod";
import { canonicalCIDR, canonicalIP, familyOf } from "../model/ip.ts";
import type { IPFamily } from "../model/kube.ts";
import { ofFamily } from "../model/local.ts";
import { checkedBy, switchFlag } from "../plugin/options.ts";

export interface TrafficAddressSettings {
  /** "primary", or a comma list of CIDRs. */
  readonly nodePortAddresses: string;
  /** Comma list of pod CIDRs, possibly empty. */
  readonly clusterCIDRs: string;
  readonly masqueradeAll: boolean;
  /** The bit of the packet mark that means "masquerade" (kube-proxy's masqueradeBit); 14 when unset. */
  readonly masqueradeBit?: string | number;
}

export function addTrafficAddressOptions(cmd: Command): void {
  cmd
    .option(
      "--nodeport-addresses <cidrs>",
      'addresses that accept NodePort traffic: "primary" (the node\'s primary IPs) or a comma list of CIDRs',
      "primary",
    )
    .option(
      "--cluster-cidr <cidrs>",
      "pod CIDRs (comma list, per family): traffic from them is pod traffic",
      "",
    )
    .option("--masquerade-all", "masquerade all traffic to ClusterIPs", false)
    .option("--masquerade-bit <bit>", "the bit (0-31) of the packet mark that asks for masquerade", "14");
}

/** The canonical CIDRs of a comma list; throws an Error saying which one is malformed. */
function parseCIDRList(text: string): string[] {
  return text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((c) => {
      try {
        return canonicalCIDR(c);
      } catch {
        throw new Error(`"${c}" is not a CIDR (e.g. 10.244.0.0/16 or 2001:db8::/64)`);
      }
    });
}

const isPrimary = (nodePortAddresses: string) => nodePortAddresses.trim() === "primary";

/** The NodePort CIDRs of --nodeport-addresses other than "primary"; throws an Error saying what to fix. */
function parseNodePortCIDRs(text: string): string[] {
  try {
    return parseCIDRList(text);
  } catch (err) {
    throw new Error(`${(err as Error).message}; give "primary" or a comma list of CIDRs`);
  }
}

/** The packet mark of a masquerade bit, e.g. 14 → "0x4000"; throws an Error saying what to fix. */
function masqueradeMark(bit: string | number | undefined): string {
  const n = bit === undefined ? 14 : Number(bit);
  if (!Number.isInteger(n) || n < 0 || n > 31) throw new Error(`"${bit}" is not a bit number from 0 to 31`);
  return `0x${(2 ** n).toString(16)}`;
}

/** The error of `read`, prefixed with the flag to fix. */
function named<T>(flag: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw new Error(`${flag}: ${(err as Error).message}`);
  }
}

/**
 * The flags of addTrafficAddressOptions as zod fields (commander's names), each checked, for a
 * backend's schema; `trafficSettings` turns the parsed fields into TrafficAddressSettings.
 */
export const trafficAddressFlags = {
  nodeportAddresses: z
    .string()
    .optional()
    .default("primary")
    .superRefine(checkedBy((text: string) => isPrimary(text) || parseNodePortCIDRs(text))),
  clusterCidr: z.string().optional().default("").superRefine(checkedBy(parseCIDRList)),
  masqueradeAll: switchFlag,
  masqueradeBit: z
    .union([z.string(), z.number()])
    .optional()
    .default("14")
    .superRefine(checkedBy(masqueradeMark)),
};

/** The parsed traffic flags under the names the backends use. */
export function trafficSettings(f: {
  readonly nodeportAddresses: string;
  readonly clusterCidr: string;
  readonly masqueradeAll: boolean;
  readonly masqueradeBit: string | number;
}): TrafficAddressSettings {
  return {
    nodePortAddresses: f.nodeportAddresses,
    clusterCIDRs: f.clusterCidr,
    masqueradeAll: f.masqueradeAll,
    masqueradeBit: f.masqueradeBit,
  };
}

/** Both families' node IPs, NodePort CIDRs and pod CIDRs; throws an Error naming a bad flag. */
function trafficAddresses(
  settings: TrafficAddressSettings,
  primaryIPs: readonly string[],
): {
  readonly nodeIPs: string[];
  readonly nodePortCIDRs: string[];
  readonly podCIDRs: string[];
  readonly masqueradeMark: string;
} {
  const nodeIPs = primaryIPs.map(canonicalIP);
  const nodePortCIDRs = isPrimary(settings.nodePortAddresses)
    ? nodeIPs.map((ip) => `${ip}/${familyOf(ip) === "IPv4" ? 32 : 128}`)
    : named("--nodeport-addresses", () => parseNodePortCIDRs(settings.nodePortAddresses));
  return {
    nodeIPs,
    nodePortCIDRs,
    podCIDRs: named("--cluster-cidr", () => parseCIDRList(settings.clusterCIDRs)),
    masqueradeMark: named("--masquerade-bit", () => masqueradeMark(settings.masqueradeBit)),
  };
}

/** What one family's rules need of the settings: its NodePort CIDRs, pod CIDRs and node IPs. */
interface FamilyTraffic {
  readonly nodePortCIDRs: readonly string[];
  readonly podCIDRs: readonly string[];
  readonly masqueradeAll: boolean;
  readonly masqueradeMark: string;
  readonly nodeIPs: readonly string[];
}

/** trafficAddresses split by family, for a backend's per-family configuration. */
export function trafficOfFamily(
  settings: TrafficAddressSettings,
  primaryIPs: readonly string[],
): (family: IPFamily) => FamilyTraffic {
  const t = trafficAddresses(settings, primaryIPs);
  return (family) => ({
    nodePortCIDRs: ofFamily(t.nodePortCIDRs, family),
    podCIDRs: ofFamily(t.podCIDRs, family),
    masqueradeAll: settings.masqueradeAll,
    masqueradeMark: t.masqueradeMark,
    nodeIPs: ofFamily(t.nodeIPs, family),
  });
}
