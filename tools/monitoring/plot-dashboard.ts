// Plots the main series of deploy/monitoring/kpng-dashboard.json from a real run, as an SVG for
// docs/monitoring.md: kpng runs the nft backend (unlabelled Services) and the iptables backend
// (service-proxy-name=legacy) in a network namespace, the cluster file changes endpoints every
// few seconds, and /metrics is scraped every 2 s; the panels are computed from the scrapes the way
// the dashboard's PromQL computes them (histogram quantiles of the buckets' increase, rates).
//
//   node tools/monitoring/plot-dashboard.ts [--seconds 60] [--out docs/img/kpng-dashboard.svg]
// Needs root (network namespaces, nft, iptables).

import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { removeLeftoverNamespaces } from "../netns/netns.ts";
import { Topology } from "../netns/topology.ts";

const MAIN = new URL("../../src/cli/main.ts", import.meta.url).pathname;
const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "60" },
    out: { type: "string", default: "docs/img/kpng-dashboard.svg" },
    services: { type: "string", default: "200" },
  },
});
const SECONDS = Number(values.seconds);
const SERVICES = Number(values.services);

/** The cluster: SERVICES Services, every fourth labelled for the iptables backend, endpoints rotating by `round`. */
function cluster(podIPs: readonly string[], round: number): string {
  const docs: object[] = [
    { apiVersion: "v1", kind: "Node", metadata: { name: "node-1" }, status: { addresses: [] } },
  ];
  const now = new Date().toISOString();
  for (let i = 0; i < SERVICES; i++) {
    const name = `svc-${i}`;
    const labels = i % 4 === 0 ? { "service.kubernetes.io/service-proxy-name": "legacy" } : {};
    const ip = `203.0.113.${(i % 250) + 1}`;
    const clusterIP = i < 250 ? ip : `198.18.${Math.floor(i / 250)}.${(i % 250) + 1}`;
    docs.push({
      apiVersion: "v1",
      kind: "Service",
      metadata: { name, namespace: "default", labels },
      spec: {
        clusterIP,
        clusterIPs: [clusterIP],
        ipFamilies: ["IPv4"],
        ports: [{ name: "http", port: 80, targetPort: 8080 }],
      },
    });
    // A tenth of the Services change endpoints each round.
    const changed = (i + round) % 10 === 0;
    const pod = podIPs[(i + (changed ? round : 0)) % podIPs.length] ?? "";
    docs.push({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: `${name}-1`,
        namespace: "default",
        labels: { "kubernetes.io/service-name": name, ...labels },
        annotations: changed ? { "endpoints.kubernetes.io/last-change-trigger-time": now } : {},
      },
      addressType: "IPv4",
      endpoints: [{ addresses: [pod], nodeName: "node-1", conditions: { ready: true } }],
      ports: [{ name: "http", protocol: "TCP", port: changed ? 8080 + (round % 2) : 8080 }],
    });
  }
  return docs.map((d) => JSON.stringify(d)).join("\n---\n");
}

type Sample = ReadonlyMap<string, number>;

/** The run's Services are IPv4 only: the dashboard's per-family series of that family. */
const FAMILY = "IPv4";

/** "name{labels}" → value, from the Prometheus text format. */
function parseScrape(text: string): Sample {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || line.trim() === "") continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** histogram_quantile over the increase of one histogram's buckets between two scrapes. */
function quantile(q: number, name: string, backend: string, a: Sample, b: Sample): number | undefined {
  const buckets: [number, number][] = [];
  const prefix = `${name}_bucket{`;
  for (const [key, value] of b) {
    if (!key.startsWith(prefix) || !key.includes(`backend="${backend}",ip_family="${FAMILY}"`)) continue;
    const le = /le="([^"]+)"/.exec(key)?.[1] ?? "";
    buckets.push([le === "+Inf" ? Number.POSITIVE_INFINITY : Number(le), value - (a.get(key) ?? 0)]);
  }
  buckets.sort((x, y) => x[0] - y[0]);
  const total = buckets.at(-1)?.[1] ?? 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Number.POSITIVE_INFINITY) return lower;
      return lower + ((le - lower) * (rank - below)) / Math.max(count - below, 1e-9);
    }
    lower = le;
    below = count;
  }
  return lower;
}

interface Series {
  readonly label: string;
  readonly color: string;
  readonly points: [number, number][];
}

interface Panel {
  readonly title: string;
  readonly unit: string;
  readonly series: Series[];
}

function renderSvg(panels: readonly Panel[], seconds: number): string {
  const W = 520;
  const H = 240;
  const pad = { l: 60, r: 16, t: 30, b: 46 };
  const parts: string[] = [];
  panels.forEach((panel, i) => {
    const x0 = (i % 2) * W;
    const y0 = Math.floor(i / 2) * H;
    const all = panel.series.flatMap((s) => s.points.map((p) => p[1]));
    const max = Math.max(1e-9, ...all) * 1.1;
    const px = (t: number) => x0 + pad.l + (t / seconds) * (W - pad.l - pad.r);
    const py = (v: number) => y0 + H - pad.b - (v / max) * (H - pad.t - pad.b);
    parts.push(
      `<rect x="${x0 + 4}" y="${y0 + 4}" width="${W - 8}" height="${H - 8}" fill="#181b1f" rx="4"/>`,
    );
    parts.push(`<text x="${x0 + 14}" y="${y0 + 22}" fill="#ccccdc" font-size="13">${panel.title}</text>`);
    for (let k = 0; k <= 4; k++) {
      const v = (max / 4) * k;
      parts.push(`<line x1="${px(0)}" x2="${px(seconds)}" y1="${py(v)}" y2="${py(v)}" stroke="#2c3235"/>`);
      parts.push(
        `<text x="${x0 + pad.l - 6}" y="${py(v) + 4}" fill="#9fa7b3" font-size="10" text-anchor="end">${format(v, panel.unit)}</text>`,
      );
    }
    for (let t = 0; t <= seconds; t += Math.max(10, Math.round(seconds / 6 / 10) * 10)) {
      parts.push(
        `<text x="${px(t)}" y="${y0 + H - pad.b + 14}" fill="#9fa7b3" font-size="10" text-anchor="middle">${t}s</text>`,
      );
    }
    panel.series.forEach((s, j) => {
      if (s.points.length > 0) {
        const d = s.points
          .map(([t, v], k) => `${k === 0 ? "M" : "L"}${px(t).toFixed(1)},${py(v).toFixed(1)}`)
          .join("");
        parts.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.6"/>`);
      }
      const lx = x0 + pad.l + j * 150;
      parts.push(`<rect x="${lx}" y="${y0 + H - 22}" width="10" height="3" fill="${s.color}"/>`);
      parts.push(`<text x="${lx + 14}" y="${y0 + H - 18}" fill="#ccccdc" font-size="10">${s.label}</text>`);
    });
  });
  const rows = Math.ceil(panels.length / 2);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${2 * W}" height="${rows * H}" font-family="sans-serif">\n<title>kpng dashboard series</title>\n<rect width="100%" height="100%" fill="#111217"/>\n${parts.join("\n")}\n</svg>\n`;
}

function format(v: number, unit: string): string {
  if (unit === "s") return v < 1 ? `${(v * 1000).toFixed(0)} ms` : `${v.toFixed(1)} s`;
  return v.toFixed(v < 10 ? 1 : 0);
}

async function main(): Promise<void> {
  await removeLeftoverNamespaces();
  const topo = await Topology.create({
    pods: [
      { name: "web-1", echo: { tcpPorts: [8080] } },
      { name: "web-2", echo: { tcpPorts: [8080] } },
    ],
  });
  const dir = mkdtempSync(join(tmpdir(), "kpng-plot-"));
  const file = join(dir, "cluster.yaml");
  const pods = ["web-1", "web-2"].map((p) => topo.pod(p).ipv4 ?? "");
  const write = (round: number) => {
    writeFileSync(`${file}.tmp`, cluster(pods, round));
    renameSync(`${file}.tmp`, file);
  };
  write(0);
  const sink = [
    "--node-name",
    "node-1",
    "--min-sync-period",
    "1s",
    "--metrics-bind-address",
    "127.0.0.1:10249",
  ];
  const kpng = topo.node.spawn(
    [
      process.execPath,
      MAIN,
      "file",
      "--input",
      file,
      "to-local",
      "to-nft",
      ...sink,
      "to-iptables",
      "--service-proxy-name",
      "legacy",
      ...sink,
    ],
    { name: "kpng" },
  );
  const scrapes: { t: number; wall: number; s: Sample }[] = [];
  try {
    const started = Date.now();
    let round = 0;
    while (Date.now() - started < SECONDS * 1000) {
      await new Promise((r) => setTimeout(r, 2000));
      const t = (Date.now() - started) / 1000;
      const text = await topo.node.exec(["curl", "-sf", "http://127.0.0.1:10249/metrics"]).then(
        (r) => r.stdout,
        () => "",
      );
      if (text !== "") scrapes.push({ t, wall: Date.now() / 1000, s: parseScrape(text) });
      if (Math.floor(t / 5) > round) write(++round);
    }
  } finally {
    await kpng.stop();
    await topo.node.exec(["nft", "delete", "table", "ip", "kpng"]).catch(() => undefined);
    await topo.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
  const BACKENDS = [
    ["nftables", "#73bf69"],
    ["iptables", "#f2cc0c"],
  ] as const;
  // Windows of 10 s, as $__rate_interval would be at this scrape interval.
  const windowed = (f: (a: Sample, b: Sample, dt: number) => number | undefined) =>
    scrapes.flatMap((b, i) => {
      const a = scrapes.find((x) => x.t >= b.t - 10) ?? scrapes[0];
      if (a === undefined || a === b || i === 0) return [];
      const v = f(a.s, b.s, b.t - a.t);
      return v === undefined ? [] : [[b.t, v] as [number, number]];
    });
  const rate = (key: string) => (a: Sample, b: Sample, dt: number) =>
    ((b.get(key) ?? 0) - (a.get(key) ?? 0)) / dt;
  const panels: Panel[] = [
    {
      title: "Rules sync duration p99 (kubeproxy_sync_proxy_rules_duration_seconds)",
      unit: "s",
      series: BACKENDS.map(([backend, color]) => ({
        label: `${backend} ${FAMILY}`,
        color,
        points: windowed((a, b) =>
          quantile(0.99, "kubeproxy_sync_proxy_rules_duration_seconds", backend, a, b),
        ),
      })),
    },
    {
      title: "Network programming latency p99 (kubeproxy_network_programming_duration_seconds)",
      unit: "s",
      series: BACKENDS.map(([backend, color]) => ({
        label: `${backend} ${FAMILY}`,
        color,
        points: windowed((a, b) =>
          quantile(0.99, "kubeproxy_network_programming_duration_seconds", backend, a, b),
        ),
      })),
    },
    {
      title: "Endpoint changes per second (kubeproxy_sync_proxy_rules_endpoint_changes_total)",
      unit: "",
      series: BACKENDS.map(([backend, color]) => ({
        label: `${backend} ${FAMILY}`,
        color,
        points: windowed(
          rate(
            `kubeproxy_sync_proxy_rules_endpoint_changes_total{backend="${backend}",ip_family="${FAMILY}"}`,
          ),
        ),
      })),
    },
    {
      title: "Age of the last sync (time() - kubeproxy_sync_proxy_rules_last_timestamp_seconds)",
      unit: "s",
      series: BACKENDS.map(([backend, color]) => ({
        label: `${backend} ${FAMILY}`,
        color,
        points: scrapes.flatMap(({ t, wall, s }) => {
          const last = s.get(
            `kubeproxy_sync_proxy_rules_last_timestamp_seconds{backend="${backend}",ip_family="${FAMILY}"}`,
          );
          return last === undefined ? [] : [[t, Math.max(0, wall - last)] as [number, number]];
        }),
      })),
    },
  ];
  writeFileSync(values.out, renderSvg(panels, SECONDS));
  process.stdout.write(`${values.out}: ${scrapes.length} scrapes over ${SECONDS} s, ${SERVICES} Services\n`);
}

await main();
