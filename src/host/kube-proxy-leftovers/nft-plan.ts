// kube-proxy's nftables tables and ipvs-mode ipsets, picked out of tool listings. Pure.

/** The table kube-proxy's nftables mode owns, in families ip and ip6. */
const KUBE_PROXY_NFT_TABLE = "kube-proxy";

/** "ip kube-proxy", "ip6 kube-proxy" from `nft list tables` output. */
export function kubeProxyNftTables(listing: string): string[] {
  const found: string[] = [];
  for (const line of listing.split("\n")) {
    const m = /^table\s+(ip|ip6)\s+(\S+)\s*$/.exec(line.trim());
    if (m !== null && m[2] === KUBE_PROXY_NFT_TABLE) found.push(`${m[1]} ${m[2]}`);
  }
  return found;
}

export function nftDeleteText(tables: readonly string[]): string {
  return tables.map((t) => `delete table ${t}\n`).join("");
}

/** The ipsets kube-proxy's ipvs mode creates (IPv6 ones carry a "KUBE-6-" prefix instead). */
const IPVS_IPSETS = [
  "LOOP-BACK",
  "CLUSTER-IP",
  "EXTERNAL-IP",
  "EXTERNAL-IP-LOCAL",
  "LOAD-BALANCER",
  "LOAD-BALANCER-LOCAL",
  "LOAD-BALANCER-FW",
  "LOAD-BALANCER-SOURCE-IP",
  "LOAD-BALANCER-SOURCE-CIDR",
  "NODE-PORT-TCP",
  "NODE-PORT-LOCAL-TCP",
  "NODE-PORT-UDP",
  "NODE-PORT-LOCAL-UDP",
  "NODE-PORT-SCTP-HASH",
  "NODE-PORT-LOCAL-SCTP-HASH",
  "HEALTH-CHECK-NODE-PORT",
  "IPVS-IPS",
];

const IPSET_NAMES = new Set(IPVS_IPSETS.flatMap((n) => [`KUBE-${n}`, `KUBE-6-${n}`]));

/** kube-proxy's ipsets among `ipset list -n` output. */
export function kubeProxyIpsets(listing: string): string[] {
  return listing
    .split("\n")
    .map((l) => l.trim())
    .filter((n) => IPSET_NAMES.has(n));
}
