// Which UDP and SCTP conntrack entries a change of local state leaves stale. TCP needs nothing:
// a connection to a gone endpoint fails and the client reconnects. A UDP "connection" lives as
// long as the client keeps sending, so without cleanup it keeps going to a gone endpoint, or
// keeps being dropped after a service that had no endpoints gets one. Pure: two states in,
// deletion filters out. Which endpoints left is model/gone-endpoints.ts's to say.

import { goneEndpoints, samePort } from "../../model/gone-endpoints.ts";
import type { IPFamily, Protocol } from "../../model/kube.ts";
import type { LocalState } from "../../model/local.ts";
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

const CT_PROTOCOLS: Readonly<Partial<Record<Protocol, CtProtocol>>> = { UDP: "udp", SCTP: "sctp" };

/** The filters that delete every stale entry between `before` and `after`, without duplicates. */
export function staleFilters(before: LocalState | undefined, after: LocalState): CtFilter[] {
  const out = new Map<string, CtFilter>();
  const add = (f: CtFilter) => {
    out.set(`${f.family} ${f.protocol} ${f.origDst ?? "*"} ${f.origDstPort} ${f.replySrc ?? "*"}`, f);
  };
  for (const [, prev, next] of serviceChanges(before, after)) {
    // Endpoints that left: entries DNATed to them, per service IP and per node port.
    for (const g of goneEndpoints(prev, next)) {
      const protocol = CT_PROTOCOLS[g.protocol];
      if (protocol === undefined) continue;
      add({
        family: g.family,
        protocol,
        ...(g.address === undefined ? {} : { origDst: g.address }),
        origDstPort: g.port,
        replySrc: g.endpoint.ip,
      });
    }
    // Ports that gained endpoints: entries created while traffic was dropped or rejected.
    for (const q of next?.ports ?? []) {
      const protocol = CT_PROTOCOLS[q.protocol];
      if (protocol === undefined || next === undefined) continue;
      const p = samePort(prev, q);
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
