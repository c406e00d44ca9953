// Which endpoints went away from a Service's UDP and SCTP ports between two of its states. A
// client keeps sending such a flow to the endpoint it got first (a conntrack entry, a connected
// socket), so whoever holds that flow must move it: to-nft and to-iptables delete conntrack
// entries (node/conntrack/stale.ts), to-ebpf destroys connected sockets (backends/ebpf). TCP
// needs nothing: a connection to a gone endpoint fails and the client reconnects.
//
// The rules are kube-proxy's conntrack cleanup:
// - a flow enters a Service port at its cluster IP, at each external IP and load-balancer IP
//   (the Service port), or at its node port on any node address;
// - a flow is stale when its endpoint no longer serves the port;
// - traffic policies are not taken into account ("consistent with TCP"): an endpoint serves the
//   port while either of its lists (cluster traffic, external traffic) names it;
// - each IP family is its own: an endpoint's flows enter at the Service's addresses of its family.
// Pure: two states of one Service in, gone (frontend, endpoint) pairs out.

import { familyOf } from "./ip.ts";
import type { IPFamily, Protocol } from "./kube.ts";
import { type LocalService, type LocalServicePort, serviceFamily } from "./local.ts";

/** One way into a Service port that a flow to a gone endpoint may have taken. */
export interface GoneEndpoint {
  readonly family: IPFamily;
  readonly protocol: Protocol;
  /** The Service address the flow was sent to; absent for the node port (any node address). */
  readonly address?: string;
  /** The Service port, or the node port when `address` is absent. */
  readonly port: number;
  /** The endpoint that no longer serves the port: its address and target port. */
  readonly endpoint: { readonly ip: string; readonly port: number };
}

/** Protocols without a connection a client would see fail: their flows need moving. */
const FLOW_PROTOCOLS: ReadonlySet<Protocol> = new Set(["UDP", "SCTP"]);

const endpointKey = (ip: string, port: number) => `${ip} ${port}`;

/** Every endpoint serving the port, whatever the traffic policy: cluster and external lists. */
function serving(p: LocalServicePort | undefined): Set<string> {
  const out = new Set<string>();
  for (const e of p?.internalEndpoints ?? []) out.add(endpointKey(e.ip, e.port));
  for (const e of p?.externalEndpoints ?? []) out.add(endpointKey(e.ip, e.port));
  return out;
}

/** The same port of the other state: same protocol and port number. */
export function samePort(s: LocalService | undefined, p: LocalServicePort): LocalServicePort | undefined {
  return s?.ports.find((q) => q.protocol === p.protocol && q.port === p.port);
}

/**
 * The (frontend, endpoint) pairs of `prev`'s UDP and SCTP ports whose endpoint no longer serves
 * the port in `next` (undefined: the Service is gone). Per endpoint, in order: the cluster IP,
 * the external IPs, the load-balancer IPs, the node port.
 */
export function goneEndpoints(
  prev: LocalService | undefined,
  next: LocalService | undefined,
): GoneEndpoint[] {
  if (prev === undefined) return [];
  const out: GoneEndpoint[] = [];
  for (const p of prev.ports) {
    if (!FLOW_PROTOCOLS.has(p.protocol)) continue;
    const kept = serving(samePort(next, p));
    const seen = new Set<string>();
    for (const e of [...p.internalEndpoints, ...p.externalEndpoints]) {
      const key = endpointKey(e.ip, e.port);
      if (kept.has(key) || seen.has(key)) continue;
      seen.add(key);
      const family = familyOf(e.ip);
      const own = family === undefined ? undefined : serviceFamily(prev, family);
      if (own === undefined) continue;
      const pair = (address: string | undefined, port: number): GoneEndpoint => ({
        family: own.family,
        protocol: p.protocol,
        ...(address === undefined ? {} : { address }),
        port,
        endpoint: { ip: e.ip, port: e.port },
      });
      for (const address of [own.clusterIP, ...own.externalIPs, ...own.loadBalancerIPs])
        out.push(pair(address, p.port));
      if (p.nodePort > 0) out.push(pair(undefined, p.nodePort));
    }
  }
  return out;
}
