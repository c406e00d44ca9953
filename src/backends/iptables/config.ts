// What the rules of one IP family depend on beyond the local state, built from the to-iptables
// options and the node's addresses. Pure: the addresses are passed in.

import { canonicalCIDR, canonicalIP, familyOf } from "../../model/ip.ts";
import { ofFamily } from "../../model/local.ts";
import { type IpFamily, ipFamilyOfTools } from "./addresses.ts";

export interface FamilyConfig {
  readonly family: IpFamily;
  /** CIDRs (this family) whose local addresses accept NodePort traffic; empty: no NodePorts. */
  readonly nodePortCIDRs: readonly string[];
  /** Pod CIDRs (this family): traffic from them is "from the cluster". */
  readonly podCIDRs: readonly string[];
  readonly masqueradeAll: boolean;
  /** The node's own addresses in this family (loadBalancerSourceRanges). */
  readonly nodeIPs: readonly string[];
}

export interface IptablesSettings {
  /** "primary", or a comma list of CIDRs. */
  readonly nodePortAddresses: string;
  /** Comma list of pod CIDRs, possibly empty. */
  readonly clusterCIDRs: string;
  readonly masqueradeAll: boolean;
}

function list(text: string): string[] {
  return text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

/** Throws an Error naming the flag when a CIDR is malformed. */
export function parseCIDRList(text: string, flag: string): string[] {
  return list(text).map((c) => {
    try {
      return canonicalCIDR(c);
    } catch {
      throw new Error(`${flag}: "${c}" is not a CIDR (e.g. 10.244.0.0/16 or 2001:db8::/64)`);
    }
  });
}

export function familyConfigs(settings: IptablesSettings, primaryIPs: readonly string[]): FamilyConfig[] {
  const nodeIPs = primaryIPs.map(canonicalIP);
  const nodePort =
    settings.nodePortAddresses.trim() === "primary"
      ? nodeIPs.map((ip) => `${ip}/${familyOf(ip) === "IPv4" ? 32 : 128}`)
      : parseCIDRList(settings.nodePortAddresses, "--nodeport-addresses");
  const pods = parseCIDRList(settings.clusterCIDRs, "--cluster-cidr");
  return (["ipv4", "ipv6"] as const).map((family) => ({
    family,
    nodePortCIDRs: ofFamily(nodePort, ipFamilyOfTools(family)),
    podCIDRs: ofFamily(pods, ipFamilyOfTools(family)),
    masqueradeAll: settings.masqueradeAll,
    nodeIPs: ofFamily(nodeIPs, ipFamilyOfTools(family)),
  }));
}
