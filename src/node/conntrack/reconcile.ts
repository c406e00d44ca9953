// The conntrack table against the Services, after a restart. A running kpng removes the entries
// each change makes stale (stale.ts), but what changed while it was down is not a change it
// sees: an endpoint removed then keeps its UDP flows for as long as clients keep sending. So, at
// the first sync, as kube-proxy does since 1.31, every UDP and SCTP entry whose original
// destination is a Service port (a cluster IP, external IP or load-balancer IP and port, or a
// node port) and whose DNAT target is not one of that port's endpoints is deleted. Entries that
// were not translated, or that go to no Service, are left alone. Pure: entries and a state in,
// deletion filters out.

import type { LocalState } from "../../model/local.ts";
import type { CtFilter } from "./stale.ts";

/** conntrack names the families ipv4 and ipv6. */
function ipFamilyOf(e: CtEntry): "IPv4" | "IPv6" {
  return e.family === "ipv6" ? "IPv6" : "IPv4";
}

/** One UDP or SCTP entry of `conntrack -L -o extended`: the original and reply directions. */
interface CtEntry {
  readonly family: "ipv4" | "ipv6";
  readonly protocol: "udp" | "sctp";
  readonly origDst: string;
  readonly origDstPort: number;
  /** Where the reply comes from: the endpoint, when the entry was DNATed. */
  readonly replySrc: string;
}

const FIELD = /(src|dst|sport|dport)=(\S+)/g;

/** Parses one line of `conntrack -L -o extended`; undefined for other lines and protocols. */
export function parseEntry(line: string): CtEntry | undefined {
  const head = /^(ipv4|ipv6)\s+\d+\s+(udp|sctp)\s/.exec(line);
  if (head === null) return undefined;
  const values: Record<string, string[]> = { src: [], dst: [], sport: [], dport: [] };
  for (const m of line.matchAll(FIELD)) values[m[1] ?? ""]?.push(m[2] ?? "");
  const origDst = values.dst?.[0];
  const origDstPort = Number(values.dport?.[0]);
  const replySrc = values.src?.[1];
  if (origDst === undefined || replySrc === undefined || !Number.isInteger(origDstPort)) return undefined;
  return {
    family: head[1] as CtEntry["family"],
    protocol: head[2] as CtEntry["protocol"],
    origDst,
    origDstPort,
    replySrc,
  };
}

/** A matcher of stale entries for one state: built once, then fed every entry of the table. */
export function staleEntryMatcher(state: LocalState): (e: CtEntry) => CtFilter | undefined {
  // "udp 198.51.100.10 53" (a service IP and port) or "udp * 30053" (a node port) → endpoints.
  const allowed = new Map<string, Set<string>>();
  const allow = (key: string, ips: Iterable<string>) => {
    const set = allowed.get(key) ?? new Set<string>();
    for (const ip of ips) set.add(ip);
    allowed.set(key, set);
  };
  for (const svc of state.services.values()) {
    for (const p of svc.ports) {
      const protocol = p.protocol === "UDP" ? "udp" : p.protocol === "SCTP" ? "sctp" : undefined;
      if (protocol === undefined) continue;
      const internal = p.internalEndpoints.map((e) => e.ip);
      const external = p.externalEndpoints.map((e) => e.ip);
      for (const f of svc.families) {
        allow(`${protocol} ${f.clusterIP} ${p.port}`, internal);
        for (const vip of [...f.externalIPs, ...f.loadBalancerIPs])
          allow(`${protocol} ${vip} ${p.port}`, external);
      }
      if (p.nodePort > 0) allow(`${protocol} * ${p.nodePort}`, external);
    }
  }
  return (e) => {
    if (e.replySrc === e.origDst) return undefined; // not translated: not a Service flow
    const byVip = allowed.get(`${e.protocol} ${e.origDst} ${e.origDstPort}`);
    if (byVip !== undefined) {
      if (byVip.has(e.replySrc)) return undefined;
      return {
        family: ipFamilyOf(e),
        protocol: e.protocol,
        origDst: e.origDst,
        origDstPort: e.origDstPort,
        replySrc: e.replySrc,
      };
    }
    const byNodePort = allowed.get(`${e.protocol} * ${e.origDstPort}`);
    if (byNodePort === undefined || byNodePort.has(e.replySrc)) return undefined;
    return { family: ipFamilyOf(e), protocol: e.protocol, origDstPort: e.origDstPort, replySrc: e.replySrc };
  };
}
