// What one family's rules depend on beyond the local state, the same for every kernel backend:
// the node's own addresses, the addresses that take NodePort traffic, the pod CIDRs, the
// masquerade options. Pure: the node's addresses are passed in.

import {
  type PodInterface,
  type TrafficAddressSettings,
  trafficOfFamily,
} from "../host/traffic-addresses.ts";
import { IP_FAMILIES } from "../model/ip.ts";
import type { IPFamily } from "../model/kube.ts";

/** One family's node addresses and options: an input of the port plan. */
export interface NodeAddresses {
  /** CIDRs (this family) whose local addresses accept NodePort traffic; empty: no NodePorts. */
  readonly nodePortCIDRs: readonly string[];
  /**
   * Pod CIDRs (this family): traffic from them is "from the cluster" (--cluster-cidr, or the
   * Node's podCIDRs with --detect-local-mode NodeCIDR).
   */
  readonly podCIDRs: readonly string[];
  /** Set instead of podCIDRs when pod traffic is told apart by its input interface. */
  readonly podInterface?: PodInterface;
  readonly masqueradeAll: boolean;
  /** The packet mark that asks for masquerade (kube-proxy's 1 << masqueradeBit); 0x4000 when unset. */
  readonly masqueradeMark?: string;
  /** The node's own addresses in this family (loadBalancerSourceRanges). */
  readonly nodeIPs: readonly string[];
}

export interface FamilySettings extends NodeAddresses {
  readonly family: IPFamily;
  /** NodePorts on 127.0.0.1 too (IPv4 iptables only; kube-proxy's iptables.localhostNodePorts). */
  readonly localhostNodePorts?: boolean;
  /**
   * Drop forwarded packets conntrack finds INVALID (iptables; kube-proxy's default unless
   * nf_conntrack_tcp_be_liberal is set). Unset: dropped.
   */
  readonly dropInvalid?: boolean;
}

/**
 * Whether pod traffic is told apart from off-cluster traffic at all (kube-proxy: the local
 * traffic detector "is implemented"): only then is ClusterIP traffic from outside the pods
 * masqueraded and pod traffic to an eTP Local port short-circuited.
 */
export function detectsLocalTraffic(node: NodeAddresses): boolean {
  return node.podCIDRs.length > 0 || node.podInterface !== undefined;
}

/** Both families' settings, IPv4 first; throws an Error naming the flag to fix. */
export function familySettings(
  settings: TrafficAddressSettings & { readonly localhostNodePorts?: boolean },
  primaryIPs: readonly string[],
  nodePodCIDRs: readonly string[] = [],
): FamilySettings[] {
  const traffic = trafficOfFamily(settings, primaryIPs, nodePodCIDRs);
  return IP_FAMILIES.map((family) => ({
    family,
    ...traffic(family),
    localhostNodePorts: settings.localhostNodePorts === true,
  }));
}
