// The Services the backend benchmarks program: ClusterIP Services with two endpoints each (or
// as many as asked), on addresses from ipOf, and the local state holding them.

import type { Protocol } from "../../src/model/kube.ts";
import { type LocalService, type LocalState, withFamilyEndpoints } from "../../src/model/local.ts";
import { ipOf } from "./nft-netns.ts";

export interface BenchServiceSpec {
  readonly name: string;
  readonly clusterIP: string;
  readonly port: { readonly name: string; readonly protocol: Protocol; readonly port: number };
  readonly targetPort: number;
  readonly endpointIPs: readonly string[];
}

/** A ClusterIP service in namespace "bench" with one port, its endpoints remote and ready. */
export function clusterIPService(spec: BenchServiceSpec): LocalService {
  const eps = spec.endpointIPs.map((ip) => ({
    ip,
    port: spec.targetPort,
    local: false,
    ready: true,
    serving: true,
    terminating: false,
  }));
  return {
    namespace: "bench",
    name: spec.name,
    type: "ClusterIP",
    families: [
      { family: "IPv4", clusterIP: spec.clusterIP, externalIPs: [], loadBalancerIPs: [], sourceRanges: [] },
    ],
    sessionAffinitySeconds: 0,
    internalTrafficPolicy: "Cluster",
    externalTrafficPolicy: "Cluster",
    healthCheckNodePort: 0,
    localReadyEndpoints: 0,
    ports: [
      withFamilyEndpoints({
        ...spec.port,
        nodePort: 0,
        hasEndpoints: eps.length > 0,
        endpointFamilies: eps.length > 0 ? ["IPv4"] : [],
        internalEndpoints: eps,
        externalEndpoints: eps,
      }),
    ],
  };
}

/** Service i with `endpoints` endpoints; a new generation moves its last endpoint to another address. */
export function svc(i: number, generation = 0, endpoints = 2): LocalService {
  return clusterIPService({
    name: `svc-${i}`,
    clusterIP: ipOf(10, i),
    port: { name: "http", protocol: "TCP", port: 80 },
    targetPort: 8080,
    endpointIPs: Array.from({ length: endpoints }, (_, e) =>
      ipOf(11 + e + (e === endpoints - 1 ? generation : 0), i),
    ),
  });
}

export function stateOf(services: LocalService[], revision: number): LocalState {
  return {
    node: "bench",
    revision,
    services: new Map(services.map((s) => [`bench/${s.name}`, s])),
    serviceCIDRs: { IPv4: [], IPv6: [] },
  };
}
