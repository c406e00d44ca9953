// Names of the chains kpng creates in the iptables nat and filter tables. Every name starts with
// KPNG- so kpng's chains sit beside other programs' chains (kube-proxy's KUBE-*) and cleanup can
// find exactly its own. Per-service chains carry a hash of what they stand for: iptables limits a
// chain name to 28 characters, so nothing readable fits.

import { hash } from "node:crypto";

const PREFIX = "KPNG-";

/** base32 (RFC 4648 alphabet) of the first bytes of a sha256: 16 characters, A-Z and 2-7. */
function hash16(text: string): string {
  const bytes = hash("sha256", text, "buffer");
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = 0;
  let value = 0;
  let out = "";
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5 && out.length < 16) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    if (out.length >= 16) break;
  }
  return out;
}

/** The per-service-port chains (nat table). */
export const portChain = {
  /** Balances over the internal endpoints (ClusterIP traffic). */
  internal: (spId: string) => `KPNG-SVC-${hash16(`svc|${spId}`)}`,
  /** Balances over the external endpoints when they differ from the internal ones. */
  externalEndpoints: (spId: string) => `KPNG-XEP-${hash16(`xep|${spId}`)}`,
  /** Entry of NodePort, externalIP and load-balancer traffic. */
  external: (spId: string) => `KPNG-EXT-${hash16(`ext|${spId}`)}`,
  /** loadBalancerSourceRanges: DNATs allowed sources only. */
  firewall: (spId: string) => `KPNG-FW-${hash16(`fw|${spId}`)}`,
  /**
   * Hairpin DNATs of one balancing chain (`chain` is its name): reached only by a connection whose
   * source is the endpoint the balancing chain picked, it marks for masquerade and DNATs to it.
   */
  hairpin: (chain: string) => `KPNG-HP-${hash16(`hp|${chain}`)}`,
  /** One endpoint of one service port (ClientIP affinity): hairpin mark, affinity, DNAT. */
  endpoint: (spId: string, ip: string, port: number) => `KPNG-SEP-${hash16(`sep|${spId}|${ip}|${port}`)}`,
} as const;

/** Chains that exist once per table; rewritten in full on every sync. */
export const SHARED_CHAINS = {
  /** nat: dispatch by destination address and port; filter: no-endpoint rejects/drops. */
  services: "KPNG-SERVICES",
  /** nat: dispatch by node port; filter: no-endpoint node ports. */
  nodePorts: "KPNG-NODEPORTS",
  /** filter: drops load-balancer traffic that KPNG-FW-* did not DNAT. */
  firewall: "KPNG-FIREWALL",
  markForMasquerade: "KPNG-MARK-MASQ",
  /** Marks for masquerade unless the source is a pod. */
  masqueradeNonPods: "KPNG-MASQ-NON-POD",
  postrouting: "KPNG-POSTROUTING",
  /** filter: every forwarded packet; drops what conntrack finds INVALID (as kube-proxy's KUBE-FORWARD). */
  forward: "KPNG-FORWARD",
  /** Exists in mangle, nat and filter: when it disappears, someone flushed the tables. */
  canary: "KPNG-CANARY",
} as const;

/** IPv4 loopback addresses: localhost NodePorts. */
export const LOCALHOST_V4 = "127.0.0.0/8";

export const BUILTIN_CHAINS: ReadonlySet<string> = new Set([
  "PREROUTING",
  "INPUT",
  "FORWARD",
  "OUTPUT",
  "POSTROUTING",
]);

export function isKpngChain(name: string): boolean {
  return name.startsWith(PREFIX);
}
