// Names of the objects kpng creates in its nft tables. Per-service objects carry a short hash of
// what they stand for (so two names never collide) and a readable suffix (so `nft list table`
// can be read by a person); both stay well under nft's 255-character name limit.

import { createHash } from "node:crypto";

export const DEFAULT_TABLE = "kpng";

/** Longest readable suffix kept in a generated name; the hash keeps truncated names unique. */
const READABLE_MAX = 180;

/** nft identifiers may hold letters, digits and `/ \ _ . -`; anything else becomes `.`. */
function sanitize(text: string): string {
  return text.replace(/[^A-Za-z0-9/_.-]/g, ".");
}

function shortHash(text: string): string {
  return createHash("sha256").update(text).digest("base64url").slice(0, 8).replaceAll("-", "_");
}

/** `<prefix>-<hash8>-<readable>`: e.g. `svc-Ab3_x9Qz-default/web/tcp/80`. */
function objectName(prefix: string, readable: string): string {
  const clean = sanitize(readable).slice(0, READABLE_MAX);
  return `${prefix}-${shortHash(`${prefix}|${readable}`)}-${clean}`;
}

/** The per-service-port chains. */
export const chainName = {
  /** Load-balances over the internal endpoints (ClusterIP traffic). */
  internal: (spId: string) => objectName("svc", spId),
  /** Load-balances over the external endpoints when they differ from the internal ones. */
  externalEndpoints: (spId: string) => objectName("xep", spId),
  /** Entry point of NodePort, externalIP and load-balancer traffic. */
  external: (spId: string) => objectName("ext", spId),
  /** loadBalancerSourceRanges check. */
  firewall: (spId: string) => objectName("fw", spId),
} as const;

/** The transport protocols a Service port can have, as nft writes them. */
export const PROTOCOLS = ["tcp", "udp", "sctp"] as const;
export type NftProtocol = (typeof PROTOCOLS)[number];

/**
 * Chains shared by every service port of one protocol that balances over the same number of
 * endpoints. They pick an endpoint from a map keyed by what the packet was sent to, so a service
 * using one owns map elements only and an endpoint change never rewrites a chain.
 */
export const pickChainName = {
  /** ClusterIP traffic: `<cluster IP> . port . i` in `endpoints-<proto>`. */
  cluster: (proto: NftProtocol, n: number) => `pick-${proto}-${n}`,
  /** externalIP and load-balancer traffic with eTP Cluster: `<VIP> . port . i` in `endpoints-<proto>`. */
  external: (proto: NftProtocol, n: number) => `ext-pick-${proto}-${n}`,
  /** NodePort traffic with eTP Cluster: `nodePort . i` in `nodeport-endpoints-<proto>`. */
  nodePort: (proto: NftProtocol, n: number) => `nodeport-pick-${proto}-${n}`,
} as const;

/**
 * The endpoint maps, one per protocol: nft 1.0.6 reads a map whose value is typed
 * `ip daddr . th dport` back from the kernel as an error, so the value names the protocol.
 */
export const endpointsMapName = {
  /** Keyed by destination address, port and index: for cluster IPs and VIPs. */
  byAddress: (proto: NftProtocol) => `endpoints-${proto}`,
  /** Keyed by node port and index. */
  byNodePort: (proto: NftProtocol) => `nodeport-endpoints-${proto}`,
} as const;

/** ClientIP affinity set of one endpoint; the timeout is part of the name (a set's timeout is fixed). */
export function affinitySetName(spId: string, ip: string, port: number, timeoutSeconds: number): string {
  return objectName("aff", `${spId}/${ip}/${port}/${timeoutSeconds}`);
}

/** Chains, maps and sets that exist once per table. */
export const STATIC = {
  services: "services",
  serviceEndpointsCheck: "service-endpoints-check",
  nodePortEndpointsCheck: "nodeport-endpoints-check",
  firewallCheck: "firewall-check",
  clusterIPsCheck: "cluster-ips-check",
  markForMasquerade: "mark-for-masquerade",
  masquerading: "masquerading",
  rejectChain: "reject-chain",
  serviceIPs: "service-ips",
  serviceNodePorts: "service-nodeports",
  noEndpointServices: "no-endpoint-services",
  noEndpointNodePorts: "no-endpoint-nodeports",
  firewallIPs: "firewall-ips",
  clusterIPs: "cluster-ips",
  nodePortIPs: "nodeport-ips",
  podCIDRs: "pod-cidrs",
  /** The cluster's Service IP ranges: traffic to an address in them that no service holds is dropped. */
  serviceCIDRs: "service-cidrs",
  hairpin: "hairpin-endpoints",
} as const;

export const ENDPOINTS_MAPS: readonly string[] = PROTOCOLS.flatMap((p) => [
  endpointsMapName.byAddress(p),
  endpointsMapName.byNodePort(p),
]);
