// The fallback controller at scale: annotated Services with fallback pods on the test API server,
// the controller in its own process (`kpng fallback-controller`), so the memory and CPU printed
// are the controller's alone. Then a batch of primaries loses its ready endpoint at once, and the
// time until each Service's fallback slice says active is measured. Pods look like a real
// cluster's (labels, annotations, managedFields, two containers with env and mounts, statuses:
// ~4 KB of JSON each), so the peak RSS printed is what the controller's manifest limit must hold.
//   node bench/fallback-controller.ts [services=2000] [pods=50000] [down=100] [--quick]
// --quick: 200 Services, 2k pods, 20 down, 2 s of steady state.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { TestApiServer } from "../test/apiserver/server.ts";
import type { RawObject } from "../test/apiserver/store.ts";
import { positionalArgs, quick, table } from "./lib/table.ts";

const MAIN = fileURLToPath(new URL("../src/cli/main.ts", import.meta.url));
const args = positionalArgs();
const services = Number(args[0] ?? (quick ? 200 : 2000));
const pods = Number(args[1] ?? (quick ? 2000 : 50_000));
const down = Number(args[2] ?? (quick ? 20 : 100));
const STEADY_S = quick ? 2 : 10;
/** The controller runs with the Node options its Deployment sets, unless told otherwise. */
const CONTROLLER_NODE_OPTIONS = process.env.CONTROLLER_NODE_OPTIONS ?? deployedNodeOptions();

function deployedNodeOptions(): string {
  const manifest = fileURLToPath(new URL("../deploy/fallback-controller.yaml", import.meta.url));
  for (const doc of parseAllDocuments(readFileSync(manifest, "utf8"))) {
    const value = doc.getIn(["spec", "template", "spec", "containers", 0, "env"]) as
      | { toJSON(): { name: string; value?: string }[] }
      | undefined;
    const option = value?.toJSON().find((e) => e.name === "NODE_OPTIONS");
    if (option?.value !== undefined) return option.value;
  }
  return "";
}

type Kinded = RawObject & { kind: string };

/** 198.18.0.0/15 is the benchmarking range (RFC 2544). */
function ip(n: number): string {
  return `198.${18 + ((n >> 16) & 1)}.${(n >> 8) & 255}.${n & 255}`;
}

function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** VmRSS: now; VmHWM: the peak since the process started. */
function memMiB(pid: number, field: "VmRSS" | "VmHWM" = "VmRSS"): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${field}:`))!;
  return Number(line.split(/\s+/)[1]) / 1024;
}

/** A pod as a Deployment makes it, with the bulk a real API server returns. */
function realisticPod(p: number): Kinded {
  const app = `app-${p % services}`;
  const container = (name: string, port: number) => ({
    name,
    image: `registry.example/${name}:1.2.3`,
    ports: [{ name: name === "app" ? "http" : "metrics", containerPort: port, protocol: "TCP" }],
    env: Array.from({ length: 6 }, (_, i) => ({ name: `SETTING_${i}`, value: `value-${i}-${p}` })),
    resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "256Mi" } },
    volumeMounts: [{ name: "kube-api-access", mountPath: "/var/run/secrets/kubernetes.io/serviceaccount" }],
  });
  return {
    kind: "Pod",
    metadata: {
      name: `pod-${p}`,
      namespace: "default",
      labels: { fallback: `svc-${p % services}`, app, "pod-template-hash": "5d8f7c9b6d" },
      annotations: {
        "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z",
        "example.org/config": "x".repeat(600),
      },
      ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: `${app}-5d8f7c9b6d`, uid: "u" }],
      managedFields: [
        {
          manager: "kube-controller-manager",
          operation: "Update",
          apiVersion: "v1",
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:metadata": { "f:labels": { ".": {}, "f:app": {} } },
            "f:spec": { x: "y".repeat(500) },
          },
        },
        {
          manager: "kubelet",
          operation: "Update",
          apiVersion: "v1",
          fieldsType: "FieldsV1",
          subresource: "status",
          fieldsV1: { "f:status": { "f:conditions": { z: "w".repeat(500) } } },
        },
      ],
    },
    spec: {
      nodeName: `node-${p % 50}`,
      serviceAccountName: "default",
      containers: [container("app", 8080), container("sidecar", 9100)],
      volumes: [
        { name: "kube-api-access", projected: { sources: [{ serviceAccountToken: { path: "token" } }] } },
      ],
      tolerations: [{ key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" }],
    },
    status: {
      phase: "Running",
      podIP: ip(p),
      podIPs: [{ ip: ip(p) }],
      hostIP: "192.0.2.1",
      conditions: ["Initialized", "Ready", "ContainersReady", "PodScheduled"].map((type) => ({
        type,
        status: "True",
        lastTransitionTime: "2026-01-01T00:00:00Z",
      })),
      containerStatuses: ["app", "sidecar"].map((name) => ({
        name,
        ready: true,
        restartCount: 0,
        image: `registry.example/${name}:1.2.3`,
        imageID: `registry.example/${name}@sha256:${"0".repeat(64)}`,
        containerID: `containerd://${"1".repeat(64)}`,
        state: { running: { startedAt: "2026-01-01T00:00:00Z" } },
      })),
    },
  } as Kinded;
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

const api = await TestApiServer.start({ bookmarkIntervalMs: 5000 });
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
for (let p = 0; p < pods; p++) api.create(realisticPod(p));
const podBytes = JSON.stringify(realisticPod(0)).length;

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
    env: {
      ...process.env,
      KUBECONFIG: "",
      HOME: "/nonexistent",
      KPNG_LOG_LEVEL: "warn",
      NODE_OPTIONS: CONTROLLER_NODE_OPTIONS,
    },
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
rows.push(["steady state RSS", `${memMiB(pid).toFixed(0)} MiB`]);
rows.push(["peak RSS (start, first list, every slice written)", `${memMiB(pid, "VmHWM").toFixed(0)} MiB`]);
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
rows.push(["RSS after the burst", `${memMiB(pid).toFixed(0)} MiB`]);
rows.push(["peak RSS over the whole run", `${memMiB(pid, "VmHWM").toFixed(0)} MiB`]);
console.log(
  `${services} annotated services, ${pods} pods (${podBytes} bytes of JSON each), controller NODE_OPTIONS="${CONTROLLER_NODE_OPTIONS}"`,
);
console.log(table(["measurement", "value"], rows));

child.kill("SIGTERM");
await new Promise((r) => child.on("exit", r));
await api.close();
