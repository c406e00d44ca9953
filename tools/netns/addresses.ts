// The addresses of the standard topology. Only documentation ranges (RFC 5737, RFC 3849) are
// used, so nothing here can collide with or route to a real network.

import ipaddr from "ipaddr.js";

/** The node's address toward the external client (the "node IP" for NodePorts). */
export const NODE_IPV4 = "192.0.2.1";
export const NODE_IPV6 = "2001:db8::1";
/** The external client, on the same link as the node. */
export const EXTERNAL_IPV4 = "192.0.2.2";
export const EXTERNAL_IPV6 = "2001:db8::2";
export const EXTERNAL_PREFIX_V4 = 24;
export const EXTERNAL_PREFIX_V6 = 64;

/** Pod addresses are allocated from these ranges (pod n gets .n and ::n). */
export const POD_CIDR_V4 = "198.51.100.0/24";
export const POD_CIDR_V6 = "2001:db8:1::/64";
/** The node side of every pod veth carries this gateway address, as CNI plugins often do. */
export const POD_GATEWAY_V4 = "198.51.100.1";
export const POD_GATEWAY_V6 = "2001:db8:1::1";

/** Service IPs (cluster, load-balancer and external IPs) come from these ranges. */
export const SERVICE_CIDR_V4 = "203.0.113.0/24";
export const SERVICE_CIDR_V6 = "2001:db8:2::/112";

/** The client pod that every topology has. */
export const CLIENT_POD = { name: "client", ipv4: "198.51.100.200", ipv6: "2001:db8:1::200" } as const;

const DOCUMENTATION_RANGES: readonly (readonly [string, number])[] = [
  ["192.0.2.0", 24],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["2001:db8::", 32],
];

/**
 * True for an address in a documentation range: the only addresses the harness and the demo
 * put into namespaces, so a typo can never route test traffic to a real network.
 */
export function isDocumentationAddress(ip: string): boolean {
  if (!ipaddr.isValid(ip)) return false;
  const addr = ipaddr.parse(ip);
  return DOCUMENTATION_RANGES.some(([net, bits]) => {
    const range = ipaddr.parse(net);
    return addr.kind() === range.kind() && addr.match(range, bits);
  });
}
