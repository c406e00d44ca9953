// The fallback controller at scale: annotated Services with fallback pods on the test API server,
// the controller in its own process (`kpng fallback-controller`), so the memory and CPU printed
// are the controller's alone. Then a batch of primaries loses its ready endpoint at once, and the
// time until each Service's fallback slice says active is measured.
//   node bench/fallback-controller.ts [services=1000] [pods=10000] [down=100] [--quick]
// --quick: 1k pods, 20 down, 2 s of steady state.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { TestApiServer } from "../test/apiserver/server.ts";
import type { RawObject } from "../test/apiserver/store.ts";
import { positionalArgs, quick, table } from "./lib/table.ts";

const MAIN = fileURLToPath(new URL("../src/cli/main.ts", import.meta.url));
const args = positionalArgs();
const services = Number(args[0] ?? 1000);
const pods = Number(args[1] ?? (quick ? 1000 : 10_000));
const down = Number(args[2] ?? (quick ? 20 : 100));
const STEADY_S = quick ? 2 : 10;

type Kinded = RawObject & { kind: string };

/** 198.18.0.0/15 is the benchmarking range (RFC 2544). */
function ip(n: number): string {
  return `198.${18 + ((n >> 16) & 1)}.${(n >> 8) & 255}.${n & 255}`;
}

function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmRSS:"))!;
  return Number(line.split(/\s+/)[1]) / 1024;
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

const api = await TestApiServer.start({ bookmarkIntervalMs: 0 });
for (let s = 0; s < services; s++) {
  api.create({
    kind: "Service",
    metadata: {
      name: `svc-${s}`,
      namespace: "default",
      annotations: { "fallback.kpng.io/selector": `fallback=svc-${s}` },
    },
    spec: {
      type: "ClusterIP",
      clusterIP: `203.0.${113 + (s >> 8)}.${s & 255}`,
      ipFamilies: ["IPv4"],
      ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: "http" }],
    },
  } as Kinded);
  api.create({
    kind: "EndpointSlice",
    metadata: {
      name: `svc-${s}-abc`,
      namespace: "default",
      labels: { "kubernetes.io/service-name": `svc-${s}` },
    },
    addressType: "IPv4",
    ports: [{ name: "http", protocol: "TCP", port: 8080 }],
    endpoints: [
      { addresses: [ip(pods + s)], conditions: { ready: true, serving: true }, nodeName: "node-1" },
    ],
  } as Kinded);
}
for (let p = 0; p < pods; p++) {
  api.create({
    kind: "Pod",
    metadata: { name: `pod-${p}`, namespace: "default", labels: { fallback: `svc-${p % services}` } },
    spec: {
      nodeName: `node-${p % 50}`,
      containers: [{ name: "c", ports: [{ name: "http", containerPort: 8080 }] }],
    },
    status: { phase: "Running", podIPs: [{ ip: ip(p) }], conditions: [{ type: "Ready", status: "True" }] },
  } as Kinded);
}

const activeAt = new Map<string, number>();
let fallbackSlices = 0;
api.store.subscribe((event) => {
  if (event.resource !== "endpointslices") return;
  const labels = event.object.metadata.labels ?? {};
  if (labels["endpointslice.kubernetes.io/managed-by"] !== "fallback.kpng.io") return;
  if (event.type === "ADDED") fallbackSlices++;
  if (labels["fallback.kpng.io/active"] === "true")
    activeAt.set(labels["kubernetes.io/service-name"]!, performance.now());
});

const started = performance.now();
const child = spawn(
  process.execPath,
  [MAIN, "fallback-controller", "--master", api.url, "--no-leader-elect", "--metrics-address", "127.0.0.1:0"],
  {
    stdio: ["ignore", "ignore", "inherit"],
    env: { ...process.env, KUBECONFIG: "", HOME: "/nonexistent", KPNG_LOG_LEVEL: "warn" },
  },
);
const pid = child.pid!;
while (fallbackSlices < services) await new Promise((r) => setTimeout(r, 50));
const rows: string[][] = [];
rows.push([
  "every fallback slice written after start",
  `${((performance.now() - started) / 1000).toFixed(1)} s`,
]);

await new Promise((r) => setTimeout(r, quick ? 1000 : 3000));
const cpu0 = cpuSeconds(pid);
await new Promise((r) => setTimeout(r, STEADY_S * 1000));
const idleCpu = (cpuSeconds(pid) - cpu0) / STEADY_S;
rows.push(["steady state RSS", `${rssMiB(pid).toFixed(0)} MiB`]);
rows.push([`steady state CPU (${STEADY_S} s)`, `${(idleCpu * 100).toFixed(2)} % of a core`]);

const downAt = new Map<string, number>();
for (let s = 0; s < down; s++) {
  const slice = api.get("EndpointSlice", `default/svc-${s}-abc`) as Kinded & {
    endpoints: { conditions: unknown }[];
  };
  slice.endpoints[0]!.conditions = { ready: false, serving: false };
  downAt.set(`svc-${s}`, performance.now());
  api.update(slice);
}
while ([...downAt.keys()].some((k) => !activeAt.has(k))) await new Promise((r) => setTimeout(r, 10));
const latencies = [...downAt].map(([k, t]) => activeAt.get(k)! - t).sort((a, b) => a - b);
rows.push([`${down} primaries down at once: activation p50`, `${quantile(latencies, 0.5).toFixed(0)} ms`]);
rows.push(["  … p99", `${quantile(latencies, 0.99).toFixed(0)} ms`]);
rows.push(["  … max", `${latencies.at(-1)!.toFixed(0)} ms`]);
rows.push(["RSS after the burst", `${rssMiB(pid).toFixed(0)} MiB`]);
console.log(`${services} services, ${pods} pods`);
console.log(table(["measurement", "value"], rows));

child.kill("SIGTERM");
await new Promise((r) => child.on("exit", r));
await api.close();
