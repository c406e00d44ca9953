// What one family's rules depend on beyond the local state, the same for every kernel backend:
// the node's own addresses, the addresses that take NodePort traffic, the pod CIDRs and
// --masquerade-all. Pure: the node's addresses are passed in.

import { type TrafficAddressSettings, trafficAddresses } from "../host/traffic-addresses.ts";
import { IP_FAMILIES } from "../model/ip.ts";
import type { IPFamily } from "../model/kube.ts";
import { ofFamily } from "../model/local.ts";

/** One family's node addresses and options: an input of the port plan. */
export interface NodeAddresses {
  /** CIDRs (this family) whose local addresses accept NodePort traffic; empty: no NodePorts. */
  readonly nodePortCIDRs: readonly string[];
  /** Pod CIDRs (this family): traffic from them is "from the cluster". */
  readonly podCIDRs: readonly string[];
  readonly masqueradeAll: boolean;
  /** The node's own addresses in this family (loadBalancerSourceRanges). */
  readonly nodeIPs: readonly string[];
}

export interface FamilySettings extends NodeAddresses {
  readonly family: IPFamily;
}

/** Both families' settings, IPv4 first; throws an Error naming the flag to fix. */
export function familySettings(
  settings: TrafficAddressSettings,
  primaryIPs: readonly string[],
): FamilySettings[] {
  const { nodeIPs, nodePortCIDRs, podCIDRs } = trafficAddresses(settings, primaryIPs);
  return IP_FAMILIES.map((family) => ({
    family,
    nodePortCIDRs: ofFamily(nodePortCIDRs, family),
    podCIDRs: ofFamily(podCIDRs, family),
    masqueradeAll: settings.masqueradeAll,
    nodeIPs: ofFamily(nodeIPs, family),
  }));
}
