// Which UDP and SCTP conntrack entries a change of local state leaves stale. TCP needs nothing:
// a connection to a gone endpoint fails and the client reconnects. A UDP "connection" lives as
// long as the client keeps sending, so without cleanup it keeps going to a gone endpoint, or
// keeps being dropped after a service that had no endpoints gets one. Pure: two states in,
// deletion filters out.

import { familyOf } from "../../model/ip.ts";
import type { IPFamily } from "../../model/kube.ts";
import {
  type LocalEndpoint,
  type LocalService,
  type LocalServicePort,
  type LocalState,
  serviceFamily,
} from "../../model/local.ts";
import { serviceChanges } from "../../model/local-changes.ts";

type CtProtocol = "udp" | "sctp";

/** One `conntrack -D` filter. Fields left out match anything. */
export interface CtFilter {
  readonly family: IPFamily;
  readonly protocol: CtProtocol;
  /** Original destination address (a service IP). */
  readonly origDst?: string;
  /** Original destination port (the service port or node port). */
  readonly origDstPort: number;
  /** Reply source address: the endpoint the entry was DNATed to. */
  readonly replySrc?: string;
}

const ctFamilyOf = (ip: string): IPFamily => familyOf(ip) ?? "IPv4";

function protocolOf(p: LocalServicePort): CtProtocol | undefined {
  if (p.protocol === "UDP") return "udp";
  if (p.protocol === "SCTP") return "sctp";
  return undefined;
}

const ips = (eps: readonly LocalEndpoint[]): Set<string> => new Set(eps.map((e) => e.ip));

/** The same port of the other state: same protocol and port number. */
function findPort(s: LocalService | undefined, p: LocalServicePort): LocalServicePort | undefined {
  return s?.ports.find((q) => q.protocol === p.protocol && q.port === p.port);
}

/** The filters that delete every stale entry between `before` and `after`, without duplicates. */
export function staleFilters(before: LocalState | undefined, after: LocalState): CtFilter[] {
  const out = new Map<string, CtFilter>();
  const add = (f: CtFilter) => {
    out.set(`${f.family} ${f.protocol} ${f.origDst ?? "*"} ${f.origDstPort} ${f.replySrc ?? "*"}`, f);
  };
  for (const [, prev, next] of serviceChanges(before, after)) {
    // Endpoints that left: entries DNATed to them, per service IP and per node port.
    for (const p of prev?.ports ?? []) {
      const protocol = protocolOf(p);
      if (protocol === undefined || prev === undefined) continue;
      const q = findPort(next, p);
      const keptInternal = ips(q?.internalEndpoints ?? []);
      const keptExternal = ips(q?.externalEndpoints ?? []);
      for (const ip of ips(p.internalEndpoints)) {
        if (keptInternal.has(ip)) continue;
        const own = serviceFamily(prev, ctFamilyOf(ip));
        if (own !== undefined)
          add({ family: own.family, protocol, origDst: own.clusterIP, origDstPort: p.port, replySrc: ip });
      }
      for (const ip of ips(p.externalEndpoints)) {
        if (keptExternal.has(ip)) continue;
        const own = serviceFamily(prev, ctFamilyOf(ip));
        for (const vip of [...(own?.externalIPs ?? []), ...(own?.loadBalancerIPs ?? [])])
          add({ family: ctFamilyOf(ip), protocol, origDst: vip, origDstPort: p.port, replySrc: ip });
        if (p.nodePort > 0) add({ family: ctFamilyOf(ip), protocol, origDstPort: p.nodePort, replySrc: ip });
      }
    }
    // Ports that gained endpoints: entries created while traffic was dropped or rejected.
    for (const q of next?.ports ?? []) {
      const protocol = protocolOf(q);
      if (protocol === undefined || next === undefined) continue;
      const p = findPort(prev, q);
      if (q.internalEndpoints.length > 0 && (p?.internalEndpoints.length ?? 0) === 0) {
        for (const { family, clusterIP } of next.families)
          add({ family, protocol, origDst: clusterIP, origDstPort: q.port });
      }
      if (q.externalEndpoints.length > 0 && (p?.externalEndpoints.length ?? 0) === 0) {
        for (const { family, externalIPs, loadBalancerIPs } of next.families) {
          for (const vip of [...externalIPs, ...loadBalancerIPs])
            add({ family, protocol, origDst: vip, origDstPort: q.port });
        }
        if (q.nodePort > 0) {
          for (const { family } of next.families) add({ family, protocol, origDstPort: q.nodePort });
        }
      }
    }
  }
  return [...out.values()];
}

/** One line of a `conntrack -R` batch. */
export function filterLine(f: CtFilter): string {
  // conntrack names the families ipv4 and ipv6.
  const parts = ["-D", "-f", f.family.toLowerCase(), "-p", f.protocol];
  if (f.origDst !== undefined) parts.push("--orig-dst", f.origDst);
  parts.push("--dport", String(f.origDstPort));
  if (f.replySrc !== undefined) parts.push("--reply-src", f.replySrc);
  return parts.join(" ");
}
