// The synthetic cluster the end-to-end benchmarks feed to kpng, as raw Kubernetes objects (what an
// API server lists, what a file holds): N Services with E endpoints each, spread over 100 Nodes.
//
// Mix: one Service in ten has internalTrafficPolicy Local, one in fifty is a NodePort (node ports
// stay unique up to 138k Services). The first `probed` Services are the ones the data-plane
// benchmark sends packets to: their cluster IPs are 203.0.113.1… and their endpoints the echo
// pod's addresses, all in documentation ranges inside the benchmark's own namespaces. The other
// Services only ever become rules: no packet is sent to their addresses.

import { closeSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { withHugePageMalloc } from "../../src/host/huge-page-malloc.ts";
import { LineProcess } from "./line-process.ts";
import { ipOf } from "./nft-netns.ts";

export const NODES = 100;
export const THIS_NODE = "node-0";
/** The flags of a benchmarked kpng on node THIS_NODE at `nodeIPv4`, syncing without pacing. */
export function benchNodeFlags(nodeIPv4: string): string[] {
  return [
    "--node-name",
    THIS_NODE,
    "--nodeport-addresses",
    `${nodeIPv4}/32`,
    "--cluster-cidr",
    "198.51.100.0/24",
    "--min-sync-period",
    "0",
  ];
}

/** kpng's compile cache, the installation's `.cache/compile`, as bin/kpng and the image set it. */
export const KPNG_COMPILE_CACHE = fileURLToPath(new URL("../../.cache/compile", import.meta.url));

/**
 * The environment of a benchmarked kpng: debug lines (read as they arrive; trace lines too with
 * KPNG_BENCH_TRACE), no kubeconfig.
 */
export const BENCH_KPNG_ENV = {
  // As bin/kpng and the image run kpng; GLIBC_TUNABLES=glibc.malloc.hugetlb=0 measures without.
  GLIBC_TUNABLES: withHugePageMalloc(process.env).GLIBC_TUNABLES ?? "",
  // The compile cache from the first module on, as bin/kpng and the image set it.
  NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? KPNG_COMPILE_CACHE,
  KPNG_LOG_LEVEL: process.env.KPNG_BENCH_TRACE ? "trace" : "debug",
  KUBECONFIG: "",
  HOME: "/nonexistent",
};

/**
 * Node's flags for a benchmarked kpng, as bin/kpng and the image run it: without V8's memory
 * reducer. KPNG_BENCH_MEMORY_REDUCER=1 measures with it.
 */
export const BENCH_KPNG_NODE_FLAGS: readonly string[] = process.env.KPNG_BENCH_MEMORY_REDUCER
  ? []
  : ["--no-memory-reducer"];

const CLI = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));

/**
 * `kpng file --input <file> to-local <sink…>` on THIS_NODE at `nodeIPv4`, in network namespace
 * `netns`, as the benchmarks run it (BENCH_KPNG_NODE_FLAGS, BENCH_KPNG_ENV).
 */
export function kpngOnFile(
  netns: string,
  nodeIPv4: string,
  file: string,
  sinkArgs: readonly string[],
): LineProcess {
  return new LineProcess("kpng", netns, kpngOnFileArgv(nodeIPv4, file, sinkArgs), BENCH_KPNG_ENV);
}

/** The argv of kpngOnFile: `<node> <flags> kpng file --input <file> [sourceArgs] to-local <sink…> <node flags>`. */
export function kpngOnFileArgv(
  nodeIPv4: string,
  file: string,
  sinkArgs: readonly string[],
  sourceArgs: readonly string[] = [],
): string[] {
  return [
    process.execPath,
    ...BENCH_KPNG_NODE_FLAGS,
    CLI,
    "file",
    "--input",
    file,
    ...sourceArgs,
    "to-local",
    ...sinkArgs,
    ...benchNodeFlags(nodeIPv4),
  ];
}

/** Cluster IPs for the probed Services: 203.0.113.1 … 203.0.113.250. */
export const MAX_PROBED = 250;

export interface ClusterShape {
  readonly services: number;
  readonly endpointsPerService: number;
  /** Services 0 … probed-1 get probe addresses; see probeEndpoints. */
  readonly probed?: number;
  /** The endpoint addresses of every probed Service (the echo pod's addresses). */
  readonly probeEndpoints?: readonly string[];
  /**
   * Node names as clouds give them ("ip-10-0-0-7.eu-west-1.compute.internal"), too long for
   * JSON.parse to share one copy between the endpoints that name them; "node-N" otherwise.
   */
  readonly cloudNodeNames?: boolean;
}

/** The name of node `n`: "node-N", or with cloudNodeNames a cloud's. */
export function nodeNameOf(shape: ClusterShape, n: number): string {
  return shape.cloudNodeNames === true ? `ip-10-0-${n}-7.eu-west-1.compute.internal` : `node-${n}`;
}

export type RawObject = {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [k: string]: unknown;
};

/** The port every Service exposes: TCP 80 and UDP 53, to 8080 and 8053 on the endpoints. */
export const SERVICE_PORTS = { tcp: 80, udp: 53, tcpTarget: 8080, udpTarget: 8053 } as const;

export function serviceName(i: number): string {
  return `svc-${i}`;
}

export function namespaceOf(i: number): string {
  return `ns-${i % 50}`;
}

export function clusterIPOf(shape: ClusterShape, i: number): string {
  return i < (shape.probed ?? 0) ? `203.0.113.${i + 1}` : ipOf(10, i + 1);
}

export function rawService(shape: ClusterShape, i: number): RawObject {
  const ip = clusterIPOf(shape, i);
  const probed = i < (shape.probed ?? 0);
  const nodePort = !probed && i % 50 === 0;
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: serviceName(i), namespace: namespaceOf(i), labels: { app: `app-${i}` } },
    spec: {
      type: nodePort ? "NodePort" : "ClusterIP",
      clusterIP: ip,
      clusterIPs: [ip],
      ipFamilies: ["IPv4"],
      internalTrafficPolicy: !probed && i % 10 === 6 ? "Local" : "Cluster",
      ports: [
        {
          name: "http",
          protocol: "TCP",
          port: SERVICE_PORTS.tcp,
          targetPort: SERVICE_PORTS.tcpTarget,
          ...(nodePort ? { nodePort: 30000 + i / 50 } : {}),
        },
        { name: "dns", protocol: "UDP", port: SERVICE_PORTS.udp, targetPort: SERVICE_PORTS.udpTarget },
      ],
    },
  };
}

/** Service i's addresses; `generation` moves endpoint 0 elsewhere (one endpoint change). */
export function endpointIPs(shape: ClusterShape, i: number, generation = 0): string[] {
  if (i < (shape.probed ?? 0)) return [...(shape.probeEndpoints ?? [])];
  const ips: string[] = [];
  for (let e = 0; e < shape.endpointsPerService; e++) {
    ips.push(e === 0 && generation > 0 ? ipOf(101 + (generation % 100), i) : ipOf(100, i * 16 + e));
  }
  return ips;
}

export function rawSlice(shape: ClusterShape, i: number, generation = 0): RawObject {
  const ips = endpointIPs(shape, i, generation);
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `${serviceName(i)}-abcde`,
      namespace: namespaceOf(i),
      labels: { "kubernetes.io/service-name": serviceName(i) },
    },
    addressType: "IPv4",
    ports: [
      { name: "http", protocol: "TCP", port: SERVICE_PORTS.tcpTarget },
      { name: "dns", protocol: "UDP", port: SERVICE_PORTS.udpTarget },
    ],
    endpoints: ips.map((ip, e) => ({
      addresses: [ip],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: nodeNameOf(shape, (i + e * 7) % NODES),
    })),
  };
}

export function rawNode(n: number, shape?: ClusterShape): RawObject {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: shape === undefined ? `node-${n}` : nodeNameOf(shape, n),
      labels: { "topology.kubernetes.io/zone": `zone-${n % 3}` },
    },
    status: { addresses: [{ type: "InternalIP", address: `192.0.2.${10 + (n % 200)}` }] },
  };
}

/** Every object of the cluster: Nodes, then each Service followed by its EndpointSlice. */
export function* clusterObjects(shape: ClusterShape): Generator<RawObject> {
  for (let n = 0; n < NODES; n++) yield rawNode(n, shape);
  for (let i = 0; i < shape.services; i++) {
    yield rawService(shape, i);
    yield rawSlice(shape, i);
  }
}

/** The Services an endpoint change picks: spread over the cluster, never a probed one. */
export function changedService(shape: ClusterShape, k: number): number {
  const first = shape.probed ?? 0;
  const span = shape.services - first;
  // i%10 == 6 is iTP Local: its remote endpoints are not this node's business.
  let i = first + ((k * 7919) % span);
  if (i % 10 === 6) i = first + ((i + 1 - first) % span);
  return i;
}

/** The cluster as one JSON `kind: List` file in `dir`, an object per line; returns its path. */
export function writeClusterFile(shape: ClusterShape, dir: string): string {
  const path = join(dir, `cluster-${shape.services}.json`);
  const fd = openSync(path, "w");
  writeSync(fd, '{"apiVersion":"v1","kind":"List","items":[\n');
  let chunk: string[] = [];
  let first = true;
  for (const o of clusterObjects(shape)) {
    chunk.push(JSON.stringify(o));
    if (chunk.length === 1000) {
      writeSync(fd, `${first ? "" : ",\n"}${chunk.join(",\n")}`);
      first = false;
      chunk = [];
    }
  }
  if (chunk.length > 0) writeSync(fd, `${first ? "" : ",\n"}${chunk.join(",\n")}`);
  writeSync(fd, "\n]}\n");
  closeSync(fd);
  return path;
}
