// What the rules of one IP family depend on beyond the local state, built from the to-iptables
// options and the node's addresses. Pure: the addresses are passed in.

import { type TrafficAddressSettings, trafficAddresses } from "../../host/traffic-addresses.ts";
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

export function familyConfigs(
  settings: TrafficAddressSettings,
  primaryIPs: readonly string[],
): FamilyConfig[] {
  const { nodeIPs, nodePortCIDRs: nodePort, podCIDRs: pods } = trafficAddresses(settings, primaryIPs);
  return (["ipv4", "ipv6"] as const).map((family) => ({
    family,
    nodePortCIDRs: ofFamily(nodePort, ipFamilyOfTools(family)),
    podCIDRs: ofFamily(pods, ipFamilyOfTools(family)),
    masqueradeAll: settings.masqueradeAll,
    nodeIPs: ofFamily(nodeIPs, ipFamilyOfTools(family)),
  }));
}
