// This node's primary IPs as kube-proxy reads them from its Node object: InternalIPs before
// ExternalIPs, the family of the first one listed first, then the first address of the other
// family. nftables mode serves NodePorts on these when nodePortAddresses is unset.

import { familyOfAddress } from "../model/ip.ts";
import type { Node } from "../model/kube.ts";

/** Empty when the Node object holds no IP address (or is not known). */
export function nodePrimaryIPs(node: Node | undefined): readonly string[] {
  if (node === undefined) return [];
  const candidates = [
    ...node.addresses.filter((a) => a.type === "InternalIP"),
    ...node.addresses.filter((a) => a.type === "ExternalIP"),
  ].map((a) => a.address);
  const first = candidates[0];
  if (first === undefined) return [];
  const primaryFamily = familyOfAddress(first);
  const secondary = candidates.find((ip) => familyOfAddress(ip) !== primaryFamily);
  return secondary === undefined ? [first] : [first, secondary];
}
