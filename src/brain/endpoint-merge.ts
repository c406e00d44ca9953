// EndpointSlices of one service → per slice port, the endpoints of one IP family, the way
// kube-proxy's endpoint slice cache merges them.

import type { EndpointSlice, IPFamily, Protocol } from "../model/kube.ts";
import { compareEndpoints } from "../model/order.ts";

/** One endpoint of one port, with the slice's conditions read with their defaults. */
export interface EndpointInfo {
  readonly ip: string;
  readonly port: number;
  readonly nodeName: string;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  readonly zoneHints: readonly string[];
  readonly nodeHints: readonly string[];
}

/** Slice ports are matched to Service ports by name and protocol. */
export function portKey(name: string, protocol: Protocol): string {
  return `${name}/${protocol}`;
}

/**
 * Keyed by portKey(name, protocol); each list sorted by ip then port. Rules:
 * - only slices whose addressType is the family (FQDN slices never match);
 * - slice ports with no name, or no/0 port, are skipped;
 * - endpoints without addresses are skipped, and only addresses[0] is used;
 * - unset ready/serving read as true, unset terminating as false;
 * - the same ip:port seen twice (across slices or pods): a non-terminating copy wins.
 */
export function mergeEndpoints(
  slices: readonly EndpointSlice[],
  family: IPFamily,
): Map<string, EndpointInfo[]> {
  const byPort = new Map<string, Map<string, EndpointInfo>>();
  for (const slice of slices) {
    if (slice.addressType !== family) continue;
    for (const port of slice.ports) {
      if (port.name === null || port.port === null || port.port === 0) continue;
      const key = portKey(port.name, port.protocol);
      let endpoints = byPort.get(key);
      if (endpoints === undefined) {
        endpoints = new Map();
        byPort.set(key, endpoints);
      }
      for (const ep of slice.endpoints) {
        const ip = ep.addresses[0];
        if (ip === undefined) continue;
        const terminating = ep.conditions.terminating === true;
        const id = `${ip}|${port.port}`;
        if (endpoints.has(id) && terminating) continue;
        endpoints.set(id, {
          ip,
          port: port.port,
          nodeName: ep.nodeName,
          ready: ep.conditions.ready !== false,
          serving: ep.conditions.serving !== false,
          terminating,
          zoneHints: ep.zoneHints,
          nodeHints: ep.nodeHints,
        });
      }
    }
  }
  const out = new Map<string, EndpointInfo[]>();
  for (const [key, endpoints] of byPort) out.set(key, [...endpoints.values()].sort(compareEndpoints));
  return out;
}
