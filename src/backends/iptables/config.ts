// What the rules of one IP family depend on beyond the local state, built from the to-iptables
// options and the node's addresses. Pure: the addresses are passed in.

import { type TrafficAddressSettings, trafficOfFamily } from "../../host/traffic-addresses.ts";
import { type IpFamily, ipFamilyOfTools } from "./addresses.ts";

export interface FamilyConfig {
  readonly family: IpFamily;
  /** CIDRs (this family) whose local addresses accept NodePort traffic; empty: no NodePorts. */
  readonly nodePortCIDRs: readonly string[];
  /** Pod CIDRs (this family): traffic from them is "from the cluster". */
  readonly podCIDRs: readonly string[];
  readonly masqueradeAll: boolean;
  /** The packet mark that asks for masquerade (kube-proxy's 1 << masqueradeBit); 0x4000 when unset. */
  readonly masqueradeMark?: string;
  /** NodePorts on 127.0.0.1 too (IPv4 only; kube-proxy's iptables.localhostNodePorts). */
  readonly localhostNodePorts?: boolean;
  /** The node's own addresses in this family (loadBalancerSourceRanges). */
  readonly nodeIPs: readonly string[];
}

export function familyConfigs(
  settings: TrafficAddressSettings & { readonly localhostNodePorts?: boolean },
  primaryIPs: readonly string[],
): FamilyConfig[] {
  const traffic = trafficOfFamily(settings, primaryIPs);
  return (["ipv4", "ipv6"] as const).map((family) => ({
    family,
    ...traffic(ipFamilyOfTools(family)),
    localhostNodePorts: settings.localhostNodePorts === true,
  }));
}
