// File source benchmark: reads cluster files as kubectl dumps them (Services, and an EndpointSlice
// of 10 endpoints per Service) in three shapes: a YAML stream of `---` separated documents, a YAML
// `kind: List`, and a JSON `kind: List`. Each case runs in a fresh process, so the heap and peak
// RSS printed are that case's own. Inputs are written to a temporary directory, deleted at the end.
//
//   ./node_modules/.bin/node --expose-gc bench/file-source.ts [--quick]
//
// --quick runs 1k Services per shape; the full run 10k per YAML shape and 10k and 100k as JSON.

import { spawnSync } from "node:child_process";
import {
  closeSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { readObjects, validateObjects } from "../src/sources/file/parse.ts";
import { contentDigest } from "../src/sources/file/source.ts";

const ENDPOINTS_PER_SERVICE = 10;
const NODES = 100;

type Shape = "yaml-stream" | "yaml-list" | "json-list";

function ip4(base: number, i: number): string {
  return `${base}.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

function uid(kind: number, i: number): string {
  const hex = (kind * 1_000_000 + i).toString(16).padStart(12, "0");
  return `6f1c2d3e-4a5b-4c6d-8e9f-${hex}`;
}

/** Service i as `kubectl get -o yaml` prints it (managed fields hidden, as kubectl does). */
function service(i: number): Record<string, unknown> {
  const ip = ip4(10, i + 1);
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      creationTimestamp: "2026-01-02T03:04:05Z",
      labels: { app: `app-${i}`, tier: "backend" },
      name: `svc-${i}`,
      namespace: `ns-${i % 50}`,
      resourceVersion: String(100000 + i),
      uid: uid(1, i),
    },
    spec: {
      clusterIP: ip,
      clusterIPs: [ip],
      internalTrafficPolicy: "Cluster",
      ipFamilies: ["IPv4"],
      ipFamilyPolicy: "SingleStack",
      ports: [
        { name: "http", port: 80, protocol: "TCP", targetPort: 8080 },
        { name: "metrics", port: 9090, protocol: "TCP", targetPort: "metrics" },
      ],
      selector: { app: `app-${i}` },
      sessionAffinity: "None",
      type: "ClusterIP",
    },
    status: { loadBalancer: {} },
  };
}

function endpointSlice(i: number): Record<string, unknown> {
  const endpoints = [];
  for (let e = 0; e < ENDPOINTS_PER_SERVICE; e++) {
    const pod = `app-${i}-7d9f8c6b5-${e.toString(36).padStart(5, "x")}`;
    endpoints.push({
      addresses: [ip4(100, i * 16 + e)],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: `node-${(i + e * 7) % NODES}`,
      targetRef: { kind: "Pod", name: pod, namespace: `ns-${i % 50}`, uid: uid(3, i * 16 + e) },
      zone: `zone-${e % 3}`,
    });
  }
  return {
    addressType: "IPv4",
    apiVersion: "discovery.k8s.io/v1",
    endpoints,
    kind: "EndpointSlice",
    metadata: {
      annotations: { "endpoints.kubernetes.io/last-change-trigger-time": "2026-01-02T03:04:06Z" },
      creationTimestamp: "2026-01-02T03:04:06Z",
      generateName: `svc-${i}-`,
      generation: 3,
      labels: {
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
        "kubernetes.io/service-name": `svc-${i}`,
      },
      name: `svc-${i}-abcde`,
      namespace: `ns-${i % 50}`,
      ownerReferences: [
        {
          apiVersion: "v1",
          blockOwnerDeletion: true,
          controller: true,
          kind: "Service",
          name: `svc-${i}`,
          uid: uid(1, i),
        },
      ],
      resourceVersion: String(200000 + i),
      uid: uid(2, i),
    },
    ports: [
      { name: "http", port: 8080, protocol: "TCP" },
      { name: "metrics", port: 9090, protocol: "TCP" },
    ],
  };
}

// A block-style YAML writer for the plain data above, with kubectl's layout (sorted keys, list
// items at their key's indentation, quotes only where a plain scalar would read as another type).
const PLAIN = /^[A-Za-z0-9_/.][-A-Za-z0-9_./]*$/;
const AMBIGUOUS =
  /^(true|false|null|yes|no|on|off|y|n|~|[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?|0x.*|0o.*|\d{4}-\d\d-\d\d.*)$/i;

function scalar(value: unknown): string {
  if (typeof value === "string")
    return PLAIN.test(value) && !AMBIGUOUS.test(value) ? value : JSON.stringify(value);
  return String(value);
}

function isEmpty(value: unknown): boolean {
  return typeof value === "object" && value !== null && Object.keys(value).length === 0;
}

function yamlLines(value: unknown, indent: string, out: string[], first = ""): void {
  // `first` is what goes before the first line ("- " for a list item), at the same width.
  if (Array.isArray(value)) {
    for (const item of value) {
      if (typeof item === "object" && item !== null && !isEmpty(item))
        yamlLines(item, `${indent}  `, out, `${indent}- `);
      else out.push(`${indent}- ${isEmpty(item) ? (Array.isArray(item) ? "[]" : "{}") : scalar(item)}`);
    }
    return;
  }
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
  let lead = first === "" ? indent : first;
  for (const [key, v] of entries) {
    if (isEmpty(v)) out.push(`${lead}${key}: ${Array.isArray(v) ? "[]" : "{}"}`);
    else if (Array.isArray(v)) {
      out.push(`${lead}${key}:`);
      yamlLines(v, indent, out);
    } else if (typeof v === "object" && v !== null) {
      out.push(`${lead}${key}:`);
      yamlLines(v, `${indent}  `, out);
    } else out.push(`${lead}${key}: ${scalar(v)}`);
    lead = indent;
  }
}

function toYaml(value: unknown): string {
  const out: string[] = [];
  yamlLines(value, "", out);
  return `${out.join("\n")}\n`;
}

function* objects(services: number): Generator<Record<string, unknown>> {
  for (let i = 0; i < services; i++) yield service(i);
  for (let i = 0; i < services; i++) yield endpointSlice(i);
}

function writeInput(dir: string, shape: Shape, services: number): string {
  const path = join(dir, `${shape}-${services}.${shape === "json-list" ? "json" : "yaml"}`);
  const list = (items: unknown[]) => ({
    apiVersion: "v1",
    items,
    kind: "List",
    metadata: { resourceVersion: "" },
  });
  if (shape === "json-list") {
    // kubectl -o json indents by 4. Written in pieces: at 100k Services the file is longer than
    // the longest string V8 can hold.
    const fd = openSync(path, "w");
    writeSync(fd, '{\n    "apiVersion": "v1",\n    "items": [');
    let first = true;
    for (const o of objects(services)) {
      writeSync(
        fd,
        `${first ? "" : ","}\n        ${JSON.stringify(o, null, 4).replaceAll("\n", "\n        ")}`,
      );
      first = false;
    }
    writeSync(
      fd,
      '\n    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n',
    );
    closeSync(fd);
  } else if (shape === "yaml-list") {
    writeFileSync(path, toYaml(list([...objects(services)])));
  } else {
    writeFileSync(path, [...objects(services)].map(toYaml).join("---\n"));
  }
  return path;
}

interface Measured {
  bytes: number;
  digest: string;
  services: number;
  endpointSlices: number;
  invalid: number;
  readMs: number;
  parseMs: number;
  validateMs: number;
  cpuMs: number;
  heapMiB: number;
  peakRssMiB: number;
}

/** The objects of `objects`, adding the time spent producing them (parsing) to `clock.ms`. */
function* timed<T>(objects: Iterable<T>, clock: { ms: number }): Generator<T> {
  const iterator = objects[Symbol.iterator]();
  for (;;) {
    const start = performance.now();
    const next = iterator.next();
    clock.ms += performance.now() - start;
    if (next.done === true) return;
    yield next.value;
  }
}

/**
 * One case, in this process, as the file source does it at startup: read the bytes and digest
 * them, then parse and validate in one pass (objects are validated as they are parsed); the time
 * spent inside the parser's iterator is the parse time, the rest validation.
 */
function measure(path: string): Measured {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  const cpuBefore = process.cpuUsage();
  const t0 = performance.now();
  const bytes = readFileSync(path);
  const digest = contentDigest(bytes);
  const t1 = performance.now();
  const parsing = { ms: 0 };
  const contents = validateObjects(timed(readObjects(bytes, path), parsing), "default");
  const t2 = performance.now();
  const cpu = process.cpuUsage(cpuBefore);
  gc?.();
  // What a running source holds: the validated objects (and the file's bytes, until the next read).
  const heapMiB = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
  return {
    bytes: bytes.length,
    digest,
    services: contents.services.length,
    endpointSlices: contents.endpointSlices.length,
    invalid: contents.invalid.length,
    readMs: t1 - t0,
    parseMs: parsing.ms,
    validateMs: t2 - t1 - parsing.ms,
    cpuMs: (cpu.user + cpu.system) / 1000,
    heapMiB,
    peakRssMiB: process.resourceUsage().maxRSS / 1024,
  };
}

function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i] ?? 0)).join("  ");
  return [line(headers), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

const oneArg = process.argv.indexOf("--one");
const writeArg = process.argv.indexOf("--write");
if (writeArg > 0) {
  // Writes one input and keeps it, for profiling: --write <dir> <shape> <services>
  const [dir = ".", shape = "yaml-stream", services = "1000"] = process.argv.slice(writeArg + 1);
  console.log(writeInput(dir, shape as Shape, Number(services)));
} else if (oneArg > 0) {
  console.log(JSON.stringify(measure(process.argv[oneArg + 1] ?? "")));
} else {
  const quick = process.argv.includes("--quick");
  const cases: [Shape, number][] = quick
    ? [
        ["yaml-stream", 1000],
        ["yaml-list", 1000],
        ["json-list", 1000],
      ]
    : [
        ["yaml-stream", 10000],
        ["yaml-list", 10000],
        ["json-list", 10000],
        ["json-list", 100000],
      ];
  const dir = mkdtempSync(join(tmpdir(), "kpng-bench-file-"));
  const rows: string[][] = [];
  try {
    for (const [shape, services] of cases) {
      const path = writeInput(dir, shape, services);
      const sizeMiB = statSync(path).size / 2 ** 20;
      const child = spawnSync(
        process.execPath,
        ["--expose-gc", "--max-old-space-size=4096", fileURLToPath(import.meta.url), "--one", path],
        { encoding: "utf8", maxBuffer: 2 ** 20 },
      );
      rmSync(path);
      if (child.status !== 0) {
        rows.push([shape, String(services), sizeMiB.toFixed(1), `failed: ${child.stderr.split("\n")[0]}`]);
        continue;
      }
      const m = JSON.parse(child.stdout) as Measured;
      if (m.services !== services || m.endpointSlices !== services || m.invalid !== 0) {
        throw new Error(
          `${shape} ${services}: read ${m.services} services, ${m.endpointSlices} slices, ${m.invalid} invalid`,
        );
      }
      rows.push([
        shape,
        String(services),
        sizeMiB.toFixed(1),
        m.readMs.toFixed(0),
        m.parseMs.toFixed(0),
        m.validateMs.toFixed(0),
        (m.readMs + m.parseMs + m.validateMs).toFixed(0),
        m.cpuMs.toFixed(0),
        m.heapMiB.toFixed(0),
        m.peakRssMiB.toFixed(0),
      ]);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `file source: Services with one EndpointSlice of ${ENDPOINTS_PER_SERVICE} endpoints each, as kubectl prints them\n`,
  );
  console.log(
    table(
      [
        "format",
        "services",
        "file MiB",
        "read ms",
        "parse ms",
        "validate ms",
        "total ms",
        "cpu ms",
        "heap MiB",
        "peak RSS MiB",
      ],
      rows,
    ),
  );
}
