// The addresses every kernel backend's rules depend on beyond the local state: which of the
// node's addresses take NodePort traffic (--nodeport-addresses) and which sources are pods
// (--cluster-cidr), with the same flags, defaults and checks for every backend.

import type { Command } from "commander";
import { canonicalCIDR, canonicalIP, hostCIDR } from "../model/ip.ts";

export interface TrafficAddressSettings {
  /** "primary", or a comma list of CIDRs. */
  readonly nodePortAddresses: string;
  /** Comma list of pod CIDRs, possibly empty. */
  readonly clusterCIDRs: string;
  readonly masqueradeAll: boolean;
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
    .option("--masquerade-all", "masquerade all traffic to ClusterIPs", false);
}

/** The canonical CIDRs of a comma list; throws an Error naming the flag when one is malformed. */
function parseCIDRList(text: string, flag: string): string[] {
  return text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((c) => {
      try {
        return canonicalCIDR(c);
      } catch {
        throw new Error(`${flag}: "${c}" is not a CIDR (e.g. 10.244.0.0/16 or 2001:db8::/64)`);
      }
    });
}

/** Both families' node IPs, NodePort CIDRs and pod CIDRs; throws an Error naming a bad flag. */
export function trafficAddresses(
  settings: TrafficAddressSettings,
  primaryIPs: readonly string[],
): { readonly nodeIPs: string[]; readonly nodePortCIDRs: string[]; readonly podCIDRs: string[] } {
  const nodeIPs = primaryIPs.map(canonicalIP);
  const nodePortCIDRs =
    settings.nodePortAddresses.trim() === "primary"
      ? nodeIPs.map(hostCIDR)
      : parseCIDRList(settings.nodePortAddresses, "--nodeport-addresses");
  return { nodeIPs, nodePortCIDRs, podCIDRs: parseCIDRList(settings.clusterCIDRs, "--cluster-cidr") };
}
