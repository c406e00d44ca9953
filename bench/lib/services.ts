// The Services the backend benchmarks program: ClusterIP Services with two endpoints each, on
// addresses from ipOf, and the local state holding them.

import type { LocalService, LocalState } from "../../src/model/local.ts";
import { ipOf } from "./nft-netns.ts";

/** Service i; a new generation moves its second endpoint to another address. */
export function svc(i: number, generation = 0): LocalService {
  const eps = [0, 1].map((e) => ({
    ip: ipOf(e === 0 ? 11 : 12 + generation, i),
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
