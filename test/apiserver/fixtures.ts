// Raw Kubernetes objects for tests, shaped as the API server stores them. TEST-NET addresses only.

import type { RawObject } from "./store.ts";

type Kinded = RawObject & { kind: string };

export function service(
  name: string,
  options: { namespace?: string; clusterIP?: string; port?: number; labels?: Record<string, string> } = {},
): Kinded {
  const clusterIP = options.clusterIP ?? "198.51.100.10";
  return {
    kind: "Service",
    apiVersion: "v1",
    metadata: { name, namespace: options.namespace ?? "default", labels: options.labels ?? {} },
    spec: {
      type: "ClusterIP",
      clusterIP,
      clusterIPs: [clusterIP],
      ipFamilies: ["IPv4"],
      ports: [{ name: "http", protocol: "TCP", port: options.port ?? 80, targetPort: 8080 }],
    },
  };
}

export function endpointSlice(
  name: string,
  serviceName: string,
  options: {
    namespace?: string;
    addresses?: string[];
    nodeName?: string;
    labels?: Record<string, string>;
  } = {},
): Kinded {
  return {
    kind: "EndpointSlice",
    apiVersion: "discovery.k8s.io/v1",
    metadata: {
      name,
      namespace: options.namespace ?? "default",
      labels: { "kubernetes.io/service-name": serviceName, ...options.labels },
    },
    addressType: "IPv4",
    ports: [{ name: "http", protocol: "TCP", port: 8080 }],
    endpoints: (options.addresses ?? ["203.0.113.5"]).map((ip) => ({
      addresses: [ip],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: options.nodeName ?? "node-1",
    })),
  };
}

export function node(name: string, labels: Record<string, string> = {}): Kinded {
  return {
    kind: "Node",
    apiVersion: "v1",
    metadata: { name, labels },
    spec: { podCIDR: "192.0.2.0/26", podCIDRs: ["192.0.2.0/26"] },
    status: { addresses: [{ type: "InternalIP", address: "192.0.2.100" }] },
  };
}

export function serviceCIDR(name: string, cidrs: string[], labels: Record<string, string> = {}): Kinded {
  return {
    kind: "ServiceCIDR",
    apiVersion: "networking.k8s.io/v1",
    metadata: { name, labels },
    spec: { cidrs },
  };
}
