// The conntrack table against the Services, after a restart. A running kpng removes the entries
// each change makes stale (stale.ts), but what changed while it was down is not a change it
// sees: an endpoint removed then keeps its UDP flows for as long as clients keep sending. So, at
// the first sync, as kube-proxy does since 1.31, every UDP and SCTP entry whose original
// destination is a Service port (a cluster IP, external IP or load-balancer IP and port, or a
// node port) and whose DNAT target is not one of that port's endpoints is deleted. Entries that
// were not translated, or that go to no Service, are left alone. Pure: entries and a state in,
// deletion filters out.

import type { LocalEndpoint, LocalState } from "../../model/local.ts";
import type { CtFilter } from "./stale.ts";

/** conntrack names the families ipv4 and ipv6. */
function ipFamilyOf(e: CtEntry): "IPv4" | "IPv6" {
  return e.family === "ipv6" ? "IPv6" : "IPv4";
}

/** One UDP or SCTP entry of `conntrack -L -o extended`: the original and reply directions. */
export interface CtEntry {
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

/** Whether conntrack translated the entry (its reply comes from elsewhere): only a Service flow is. */
export function isTranslated(e: CtEntry): boolean {
  return e.replySrc !== e.origDst;
}

/**
 * The filters deleting the stale ones among `entries` (translated entries, see isTranslated).
 * The services are walked once, and only the ports some entry went to are indexed: a node's
 * table holds a few Service flows, the state up to 100k Services, and this runs while kpng
 * follows changes.
 */
export function staleEntries(state: LocalState, entries: readonly CtEntry[]): CtFilter[] {
  if (entries.length === 0) return [];
  const vips = new Set<string>();
  const nodePorts = new Set<number>();
  for (const e of entries) {
    vips.add(e.origDst);
    nodePorts.add(e.origDstPort);
  }
  // "udp 198.51.100.10 53" (a service IP and port) or "udp * 30053" (a node port) → endpoints.
  const allowed = new Map<string, Set<string>>();
  const allow = (key: string, endpoints: readonly LocalEndpoint[]) => {
    let set = allowed.get(key);
    if (set === undefined) {
      set = new Set();
      allowed.set(key, set);
    }
    for (const e of endpoints) set.add(e.ip);
  };
  for (const svc of state.services.values()) {
    for (const p of svc.ports) {
      const protocol = p.protocol === "UDP" ? "udp" : p.protocol === "SCTP" ? "sctp" : undefined;
      if (protocol === undefined) continue;
      for (const f of svc.families) {
        if (vips.has(f.clusterIP)) allow(`${protocol} ${f.clusterIP} ${p.port}`, p.internalEndpoints);
        for (const vip of f.externalIPs)
          if (vips.has(vip)) allow(`${protocol} ${vip} ${p.port}`, p.externalEndpoints);
        for (const vip of f.loadBalancerIPs)
          if (vips.has(vip)) allow(`${protocol} ${vip} ${p.port}`, p.externalEndpoints);
      }
      if (p.nodePort > 0 && nodePorts.has(p.nodePort))
        allow(`${protocol} * ${p.nodePort}`, p.externalEndpoints);
    }
  }
  const out: CtFilter[] = [];
  for (const e of entries) {
    const byVip = allowed.get(`${e.protocol} ${e.origDst} ${e.origDstPort}`);
    if (byVip !== undefined) {
      if (!byVip.has(e.replySrc))
        out.push({
          family: ipFamilyOf(e),
          protocol: e.protocol,
          origDst: e.origDst,
          origDstPort: e.origDstPort,
          replySrc: e.replySrc,
        });
      continue;
    }
    const byNodePort = allowed.get(`${e.protocol} * ${e.origDstPort}`);
    if (byNodePort !== undefined && !byNodePort.has(e.replySrc))
      out.push({
        family: ipFamilyOf(e),
        protocol: e.protocol,
        origDstPort: e.origDstPort,
        replySrc: e.replySrc,
      });
  }
  return out;
}
