// A synthetic cluster for the in-process brain benchmarks, as validated model objects (the
// end-to-end benchmarks feed the CLI raw objects from bench/lib/cluster.ts): Services (mostly
// traffic policy Cluster, some Local), one EndpointSlice each with endpoints spread over the
// nodes as a scheduler spreads pods, and Nodes in three zones. Everything goes through
// src/model/validate.ts, as objects from the API server do.

import type { EndpointSlice, Node, Service } from "../../src/model/kube.ts";
import { parseEndpointSlice, parseNode, parseService } from "../../src/model/validate.ts";

export type Policy = "cluster" | "itp-local" | "nodeport-etp-local" | "lb-etp-local";

/** Six in ten services use traffic policy Cluster; the rest exercise the Local policies. */
const POLICIES: readonly Policy[] = [
  "cluster",
  "cluster",
  "cluster",
  "cluster",
  "cluster",
  "cluster",
  "itp-local",
  "itp-local",
  "nodeport-etp-local",
  "lb-etp-local",
];

export function policyOf(i: number): Policy {
  return POLICIES[i % POLICIES.length] ?? "cluster";
}

export function ip4(base: number, i: number): string {
  return `${base}.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

export function must<T>(r: { ok: true; value: T } | { ok: false; reason: string }): T {
  if (!r.ok) throw new Error(r.reason);
  return r.value;
}

/** Service i as the API server lists it; `labels` are added to its own. */
export function rawService(i: number, labels: Record<string, string> = {}): unknown {
  const policy = policyOf(i);
  const ip = ip4(10, i + 1);
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name: `svc-${i}`,
      namespace: `ns-${i % 50}`,
      resourceVersion: "1",
      labels: { app: `app-${i}`, ...labels },
    },
    spec: {
      type:
        policy === "nodeport-etp-local"
          ? "NodePort"
          : policy === "lb-etp-local"
            ? "LoadBalancer"
            : "ClusterIP",
      clusterIP: ip,
      clusterIPs: [ip],
      ipFamilies: ["IPv4"],
      internalTrafficPolicy: policy === "itp-local" ? "Local" : "Cluster",
      externalTrafficPolicy: policy.endsWith("etp-local") ? "Local" : "Cluster",
      healthCheckNodePort: policy === "lb-etp-local" ? 32000 + (i % 700) : undefined,
      ports: [
        {
          name: "http",
          port: 80,
          targetPort: 8080,
          nodePort:
            policy === "nodeport-etp-local" || policy === "lb-etp-local" ? 30000 + (i % 2700) : undefined,
        },
      ],
    },
    status: policy === "lb-etp-local" ? { loadBalancer: { ingress: [{ ip: ip4(11, i + 1) }] } } : {},
  };
}

export function benchService(i: number): Service {
  return must(parseService(rawService(i)));
}

/**
 * Service i's slice: `endpoints` endpoints on distinct nodes (a stride through the nodes, so
 * every node hosts about as many). Generation g moves the first endpoint to a new address.
 */
export function benchSlice(i: number, nodes: number, endpoints: number, generation = 0): EndpointSlice {
  const list = [];
  for (let e = 0; e < endpoints; e++) {
    const address = e === 0 && generation > 0 ? ip4(101, i * 64 + generation) : ip4(100, i * 16 + e);
    list.push({
      addresses: [address],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: `node-${(i + e * 97) % nodes}`,
    });
  }
  return must(
    parseEndpointSlice({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: `svc-${i}-abcde`,
        namespace: `ns-${i % 50}`,
        resourceVersion: String(generation + 1),
        labels: { "kubernetes.io/service-name": `svc-${i}` },
      },
      addressType: "IPv4",
      ports: [{ name: "http", protocol: "TCP", port: 8080 }],
      endpoints: list,
    }),
  );
}

/** Node n, in zone-(n mod 3); `labels` are added to its own. */
export function rawNode(n: number, labels: Record<string, string> = {}): unknown {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: `node-${n}`,
      resourceVersion: "1",
      labels: { "topology.kubernetes.io/zone": `zone-${n % 3}`, ...labels },
    },
    status: { addresses: [{ type: "InternalIP", address: ip4(192, n + 1) }] },
  };
}

export function benchNode(n: number): Node {
  return must(parseNode(rawNode(n)));
}
