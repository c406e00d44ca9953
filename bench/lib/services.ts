// The Services the backend benchmarks program: ClusterIP Services with two endpoints each (or
// as many as asked), on addresses from ipOf, and the local state holding them.

import type { LocalService, LocalState } from "../../src/model/local.ts";
import { ipOf } from "./nft-netns.ts";

/** Service i with `endpoints` endpoints; a new generation moves its last endpoint to another address. */
export function svc(i: number, generation = 0, endpoints = 2): LocalService {
  const eps = Array.from({ length: endpoints }, (_, e) => ({
    ip: ipOf(11 + e + (e === endpoints - 1 ? generation : 0), i),
    port: 8080,
    local: false,
    ready: true,
    serving: true,
    terminating: false,
  }));
  return {
    namespace: "bench",
    name: `svc-${i}`,
    type: "ClusterIP",
    clusterIPs: [ipOf(10, i)],
    externalIPs: [],
    loadBalancerIPs: [],
    sourceRanges: [],
    sessionAffinitySeconds: 0,
    internalTrafficPolicy: "Cluster",
    externalTrafficPolicy: "Cluster",
    healthCheckNodePort: 0,
    localReadyEndpoints: 0,
    ports: [
      {
        name: "http",
        protocol: "TCP",
        port: 80,
        nodePort: 0,
        hasEndpoints: true,
        endpointFamilies: ["IPv4"],
        internalEndpoints: eps,
        externalEndpoints: eps,
      },
    ],
  };
}

export function stateOf(services: LocalService[], revision: number): LocalState {
  return {
    node: "bench",
    revision,
    services: new Map(services.map((s) => [`bench/${s.name}`, s])),
    serviceCIDRs: [],
  };
}
