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
 * Which of two names the endpoint maps and the pick chains that draw from them carry. A cold
 * start writes generation 0 (no suffix); a restart that adopts a table writes the other
 * generation beside the one serving, moves each dispatch element over, then deletes the old
 * one, so it never lists the endpoint maps (a million elements each at 100k Services).
 */
export type Generation = 0 | 1;

/** The generation a restart writes when the table serves from `serving`. */
export function nextGeneration(serving: Generation): Generation {
  return serving === 0 ? 1 : 0;
}

const suffix = (g: Generation | undefined): string => (g === 1 ? "-g1" : "");

/**
 * Chains shared by every service port of one protocol that balances over the same number of
 * endpoints. They pick an endpoint from a map keyed by what the packet was sent to, so a service
 * using one owns map elements only and an endpoint change never rewrites a chain.
 */
export const pickChainName = {
  /** ClusterIP traffic: `<cluster IP> . port . i` in `endpoints-<proto>`. */
  cluster: (proto: NftProtocol, n: number, g?: Generation) => `pick-${proto}-${n}${suffix(g)}`,
  /** externalIP and load-balancer traffic with eTP Cluster: `<VIP> . port . i` in `endpoints-<proto>`. */
  external: (proto: NftProtocol, n: number, g?: Generation) => `ext-pick-${proto}-${n}${suffix(g)}`,
  /** NodePort traffic with eTP Cluster: `nodePort . i` in `nodeport-endpoints-<proto>`. */
  nodePort: (proto: NftProtocol, n: number, g?: Generation) => `nodeport-pick-${proto}-${n}${suffix(g)}`,
} as const;

/**
 * The endpoint maps, one per protocol: nft 1.0.6 reads a map whose value is typed
 * `ip daddr . th dport` back from the kernel as an error, so the value names the protocol.
 */
export const endpointsMapName = {
  /** Keyed by destination address, port and index: for cluster IPs and VIPs. */
  byAddress: (proto: NftProtocol, g?: Generation) => `endpoints-${proto}${suffix(g)}`,
  /** Keyed by node port and index. */
  byNodePort: (proto: NftProtocol, g?: Generation) => `nodeport-endpoints-${proto}${suffix(g)}`,
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

/** The endpoint maps of one generation. */
export function endpointsMaps(g: Generation): readonly string[] {
  return PROTOCOLS.flatMap((p) => [endpointsMapName.byAddress(p, g), endpointsMapName.byNodePort(p, g)]);
}

const MAP_GENERATION: ReadonlyMap<string, Generation> = new Map([
  ...endpointsMaps(0).map((n) => [n, 0] as const),
  ...endpointsMaps(1).map((n) => [n, 1] as const),
]);

/** The generations whose endpoint maps are among `names` (a table's sets and maps). */
export function generationsOf(names: Iterable<string>): Set<Generation> {
  const out = new Set<Generation>();
  for (const name of names) {
    const g = MAP_GENERATION.get(name);
    if (g !== undefined) out.add(g);
  }
  return out;
}
