// First-connection latency through a cluster IP from a client pod, eBPF versus nft in one run:
// kpng runs `to-ebpf` (whose nft companion programs the same Services), and the same client
// connects once from inside the balanced cgroup (the connect4 program picks the endpoint) and once
// from outside it (nft DNAT in the node). TCP connect + first line, new connection each time.
// Needs root and build/kpng.bpf.o.
//   node bench/ebpf-dataplane.ts [--quick] [--samples=300]

import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { mountBpf } from "../tools/netns/bpf-mounts.ts";
import type { ProbeRequest } from "../tools/netns/probe.ts";
import { probeFrom } from "../tools/netns/probe-from.ts";
import { Topology } from "../tools/netns/topology.ts";
import { quantile } from "./lib/nft-netns.ts";
import { flagValue, table } from "./lib/table.ts";

const quick = process.argv.includes("--quick");
const SAMPLES = Number(flagValue("samples") ?? (quick ? 40 : 300));
const OBJECT = fileURLToPath(new URL("../build/kpng.bpf.o", import.meta.url));
const CLI = fileURLToPath(new URL("../src/cli/main.ts", import.meta.url));

if (process.getuid?.() !== 0 || !existsSync(OBJECT)) {
  console.log("ebpf-dataplane: skipped (needs root and build/kpng.bpf.o: npm run build:bpf)");
  process.exit(0);
}

const topo = await Topology.create({ pods: [{ name: "web-1", echo: { tcpPorts: [8080] } }] });
const mounts = await mountBpf();
const dir = mkdtempSync(join(tmpdir(), "kpng-ebpf-dataplane-"));
const flags = ["--bpf-root", mounts.bpfRoot, "--cgroup-root", mounts.clients];
try {
  const file = join(dir, "cluster.json");
  const web = topo.pod("web-1").ipv4!;
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: "v1",
      kind: "List",
      items: [
        { apiVersion: "v1", kind: "Node", metadata: { name: "node-1" } },
        {
          apiVersion: "v1",
          kind: "Service",
          metadata: { name: "web", namespace: "default" },
          spec: {
            clusterIP: "203.0.113.10",
            clusterIPs: ["203.0.113.10"],
            ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }],
          },
        },
        {
          apiVersion: "discovery.k8s.io/v1",
          kind: "EndpointSlice",
          metadata: { name: "web-1", namespace: "default", labels: { "kubernetes.io/service-name": "web" } },
          addressType: "IPv4",
          endpoints: [{ addresses: [web], nodeName: "node-1", conditions: { ready: true, serving: true } }],
          ports: [{ name: "http", port: 8080, protocol: "TCP" }],
        },
      ],
    }),
  );
  const kpng = topo.node.spawn(
    [
      process.execPath,
      CLI,
      "file",
      "--input",
      file,
      "to-local",
      "to-ebpf",
      ...flags,
      "--node-name",
      "node-1",
      "--healthz-bind-address",
      "",
      "--metrics-bind-address",
      "",
    ],
    { name: "kpng" },
  );
  const req: ProbeRequest = { proto: "tcp", host: "203.0.113.10", port: 80, timeoutMs: 2000 };
  const ok = async (cgroup?: string) =>
    (await probeFrom(topo.client.ns, [req], cgroup === undefined ? {} : { cgroup }))[0]?.ok === true;
  for (let i = 0; i < 300 && !((await ok()) && (await ok(mounts.clients))); i++) {
    await new Promise((r) => setTimeout(r, 200));
  }
  // Rounds alternate between the two paths so that the machine's load drifts over both alike;
  // each round's first connections (a fresh probe process) are warm-up and not counted.
  const paths = [
    ["eBPF (client in the cgroup)", mounts.clients],
    ["nft (client outside it)", undefined],
  ] as const;
  const samples = new Map<string, number[]>(paths.map(([name]) => [name, []]));
  const ROUNDS = quick ? 2 : 6;
  const WARMUP = 10;
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, cgroup] of round % 2 === 0 ? paths : [...paths].reverse()) {
      const results = await probeFrom(
        topo.client.ns,
        Array.from({ length: WARMUP + Math.ceil(SAMPLES / ROUNDS) }, () => req),
        { concurrency: 1, ...(cgroup === undefined ? {} : { cgroup }) },
      );
      for (const r of results.slice(WARMUP)) if (r.ok) samples.get(name)?.push(r.ms);
    }
  }
  const rows = [...samples].map(([name, ms]) => [
    name,
    String(ms.length),
    quantile(ms, 0.5).toFixed(3),
    quantile(ms, 0.99).toFixed(3),
  ]);
  console.log(table(["path", "connections", "p50 (ms)", "p99 (ms)"], rows));
  await kpng.stop();
  await topo.node.exec([process.execPath, CLI, "cleanup", "ebpf", ...flags], { allowFailure: true });
} finally {
  await topo.destroy();
  await mounts.destroy();
  rmSync(dir, { recursive: true, force: true });
}
