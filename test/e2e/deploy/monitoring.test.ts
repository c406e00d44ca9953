// deploy/monitoring: every metric the Grafana dashboard and the Prometheus alert rules use is
// one a running kpng exports (scraped from /metrics of kpng running nft and iptables backends in
// a network namespace, and of the fallback controller against the test API server), and
// promtool accepts the rules.

import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { parse } from "yaml";
import { TestApiServer } from "../../apiserver/server.ts";
import { eventually } from "../../support/eventually.ts";
import { netnsSkipReason, type Spawned, suiteTopology } from "../../support/netns.ts";
import { writeCluster } from "../contract/cluster.ts";
import { spawnTwoBackends } from "../contract/two-backends.ts";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const MAIN = join(ROOT, "src/cli/main.ts");
const DASHBOARD = join(ROOT, "deploy/monitoring/kpng-dashboard.json");
const ALERTS = join(ROOT, "deploy/monitoring/kpng-alerts.yaml");
const skip = await netnsSkipReason();

/** Every PromQL expression of the dashboard's panels and the rule groups. */
function expressions(): string[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as {
    panels: { targets: { expr: string }[] }[];
    templating: { list: { definition?: string }[] };
  };
  const rules = parse(readFileSync(ALERTS, "utf8")) as { groups: { rules: { expr: string }[] }[] };
  return [
    ...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)),
    ...dashboard.templating.list.flatMap((v) => (v.definition ? [v.definition] : [])),
    ...rules.groups.flatMap((g) => g.rules.map((r) => r.expr)),
  ];
}

/** /metrics of `kpng fallback-controller` run against the test API server. */
async function fallbackControllerMetrics(): Promise<string> {
  const api = await TestApiServer.start();
  const port = 20000 + (process.pid % 20000);
  const child = spawn(
    process.execPath,
    [
      MAIN,
      "fallback-controller",
      "--master",
      api.url,
      "--no-leader-elect",
      "--metrics-address",
      `127.0.0.1:${port}`,
    ],
    { stdio: "ignore", env: { ...process.env, KUBECONFIG: "", HOME: "/nonexistent" } },
  );
  try {
    let text = "";
    await eventually(
      async () => {
        const res = await fetch(`http://127.0.0.1:${port}/metrics`, {
          signal: AbortSignal.timeout(2000),
        }).catch(() => undefined);
        text = res?.ok ? await res.text() : "";
        return text !== "";
      },
      "the fallback controller's /metrics",
      30_000,
    );
    return text;
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    await api.close();
  }
}

/** The metric names an expression reads, histogram series (_bucket, _count, _sum) by their family. */
function metricsOf(expr: string, types: ReadonlyMap<string, string>): string[] {
  return [...expr.matchAll(/\b(?:kubeproxy|kpng)_[a-z0-9_]+/g)].map(([name]) => {
    const base = name.replace(/_(bucket|count|sum)$/, "");
    return base !== name && types.get(base) === "histogram" ? base : name;
  });
}

describe("deploy/monitoring", () => {
  test("promtool accepts the alert rules", async () => {
    const { stdout } = await promisify(execFile)("promtool", ["check", "rules", ALERTS]);
    assert.match(stdout, /SUCCESS: \d+ rules found/);
  });

  test("the dashboard and the rules read only kube-proxy's and kpng's metrics", () => {
    for (const expr of expressions()) assert.match(expr, /\b(kubeproxy|kpng)_/, expr);
  });

  describe("against a running kpng", { skip }, () => {
    const env = suiteTopology({ pods: [{ name: "web-1", echo: { tcpPorts: [8080] } }] });
    const dir = mkdtempSync(join(tmpdir(), "kpng-monitoring-e2e-"));
    const file = join(dir, "cluster.yaml");
    let kpng: Spawned | undefined;
    let scrape = "";

    before(async () => {
      const topo = env.topology;
      const ip = topo.pod("web-1").ipv4 ?? "";
      const endpoints = [{ ip, node: "node-1" }];
      const http = [{ name: "http", port: 80, targetPort: 8080 }];
      writeCluster(file, [
        { name: "web", clusterIP: "203.0.113.10", ports: http, endpoints },
        { name: "old", clusterIP: "203.0.113.11", ports: http, endpoints, proxyName: "legacy" },
      ]);
      kpng = spawnTwoBackends(topo.node, file, [
        "--healthz-bind-address",
        "127.0.0.1:10256",
        "--metrics-bind-address",
        "127.0.0.1:10249",
      ]);
      await eventually(
        async () => {
          const r = await topo.node
            .exec(["curl", "-sf", "http://127.0.0.1:10249/metrics"])
            .catch(() => undefined);
          scrape = r?.stdout ?? "";
          return /kubeproxy_sync_proxy_rules_last_timestamp_seconds\{backend="iptables",ip_family="IPv4"\}/.test(
            scrape,
          );
        },
        "both backends to sync and /metrics to answer",
        30_000,
      );
      // One /healthz answer, so its counter has a sample.
      await topo.node.exec(["curl", "-s", "http://127.0.0.1:10256/healthz"]);
      scrape = (await topo.node.exec(["curl", "-sf", "http://127.0.0.1:10249/metrics"])).stdout;
      scrape += await fallbackControllerMetrics();
    });

    after(async () => {
      await kpng?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    test("every metric of the dashboard and the rules is exported", () => {
      const types = new Map<string, string>();
      for (const [, name, type] of scrape.matchAll(/^# TYPE (\S+) (\S+)$/gm))
        types.set(name ?? "", type ?? "");
      const used = new Set(expressions().flatMap((e) => metricsOf(e, types)));
      assert.ok(used.size > 15, `only ${used.size} metrics found in the expressions`);
      const missing = [...used].filter((name) => !types.has(name)).sort();
      assert.deepEqual(missing, [], "metrics used by deploy/monitoring but not exported by kpng");
    });

    test("the sync metrics carry the backend and ip_family labels", () => {
      for (const backend of ["nftables", "iptables"])
        assert.match(
          scrape,
          new RegExp(
            `kubeproxy_sync_proxy_rules_duration_seconds_count\\{backend="${backend}",ip_family="IPv4"\\} [1-9]`,
          ),
        );
    });

    test("per-family panels and alerts group by ip_family", () => {
      const perFamily = expressions().filter((e) =>
        /kubeproxy_(sync_proxy_rules_duration_seconds|network_programming_duration_seconds)_bucket/.test(e),
      );
      assert.ok(perFamily.length >= 4);
      for (const e of perFamily) assert.match(e, /by \([^)]*ip_family/, e);
    });
  });
});
