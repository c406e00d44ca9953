// The metrics port as kube-proxy's: /metrics, /proxyMode, /healthz, /configz, /flagz, profiles
// only with --profiling; and a taken port retried every 5 s unless bindAddressHardFail.

import assert from "node:assert/strict";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, it, mock } from "node:test";
import { pino } from "pino";
import { BIND_RETRY_MS, RetryingServer } from "../../../src/node/bind-retry.ts";
import { healthAnswer } from "../../../src/node/health-server.ts";
import { publishComponentDocuments, startMetricsServer } from "../../../src/node/metrics-server.ts";
import { NodeServices } from "../../../src/node/node-services.ts";
import { parseNodeServicesOptions } from "../../../src/node/options.ts";
import { close, listen } from "../../../src/observability/http-listen.ts";

function portOf(s: Server): number {
  return (s.address() as AddressInfo).port;
}

async function get(port: number, path: string): Promise<{ status: number; body: string; type: string }> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(30_000) });
  return { status: r.status, body: await r.text(), type: r.headers.get("content-type") ?? "" };
}

describe("metrics port paths", () => {
  const servers: Server[] = [];
  after(() => Promise.all(servers.map(close)));

  it("serves /metrics, /proxyMode, /healthz, /flagz and /configz", async () => {
    const s = await startMetricsServer("127.0.0.1", 0, "iptables");
    servers.push(s);
    const port = portOf(s);
    assert.equal((await get(port, "/proxyMode")).body, "iptables");
    assert.deepEqual(await get(port, "/healthz").then((r) => [r.status, r.body]), [200, "ok"]);
    const metrics = await get(port, "/metrics");
    assert.equal(metrics.status, 200);
    for (const name of [
      "process_cpu_seconds_total",
      "process_resident_memory_bytes",
      "process_start_time_seconds",
    ])
      assert.match(metrics.body, new RegExp(`^${name} `, "m"), name);
    assert.equal((await get(port, "/configz")).status, 404, "nothing published: not running as kube-proxy");
    publishComponentDocuments({ kind: "KubeProxyConfiguration", mode: "iptables" }, ["--config=/c", "--v=2"]);
    const configz = await get(port, "/configz");
    assert.equal(configz.type, "application/json");
    assert.deepEqual(JSON.parse(configz.body), {
      "kubeproxy.config.k8s.io": { kind: "KubeProxyConfiguration", mode: "iptables" },
    });
    assert.equal((await get(port, "/flagz")).body, "--config=/c\n--v=2\n");
    assert.equal((await get(port, "/debug/pprof/heap")).status, 404, "profiles only with --profiling");
  });

  it("with --profiling: a heap snapshot and a CPU profile", async () => {
    const s = await startMetricsServer("127.0.0.1", 0, "nftables", { profiling: true });
    servers.push(s);
    const cpu = await get(portOf(s), "/debug/pprof/profile?seconds=1");
    assert.equal(cpu.status, 200);
    assert.ok(Array.isArray((JSON.parse(cpu.body) as { nodes?: unknown[] }).nodes), "a V8 .cpuprofile");
    const heap = await get(portOf(s), "/debug/pprof/heap");
    assert.equal(heap.status, 200);
    assert.ok("snapshot" in (JSON.parse(heap.body) as object), "a V8 .heapsnapshot");
  });
});

describe("a node server's port in use", () => {
  const lines: { msg: string; retryInMs?: number }[] = [];
  const log = pino({ level: "info" }, { write: (l: string) => lines.push(JSON.parse(l)) });
  const ok = (_req: unknown, res: { end(b: string): void }) => res.end("ok");

  it("bindAddressHardFail: fatal", async () => {
    const taken = await listen("127.0.0.1", 0, ok);
    try {
      await assert.rejects(
        RetryingServer.start(() => listen("127.0.0.1", portOf(taken), ok), {
          what: "healthz",
          address: "x",
          hardFail: true,
          log,
        }),
        /EADDRINUSE/,
      );
    } finally {
      await close(taken);
    }
  });

  it("otherwise logged and retried every 5 s until the port is free", async () => {
    mock.timers.enable({ apis: ["setTimeout"] });
    const taken = await listen("127.0.0.1", 0, ok);
    const port = portOf(taken);
    let attempts = 0;
    const open = () => {
      attempts += 1;
      return listen("127.0.0.1", port, ok);
    };
    const s = await RetryingServer.start(open, {
      what: "metrics",
      address: `127.0.0.1:${port}`,
      hardFail: false,
      log,
    });
    try {
      assert.equal(s.server, undefined);
      assert.equal(attempts, 1);
      assert.ok(lines.some((l) => /cannot listen/.test(l.msg) && l.retryInMs === BIND_RETRY_MS));
      mock.timers.tick(BIND_RETRY_MS - 1);
      assert.equal(attempts, 1, "not before 5 s");
      mock.timers.tick(1);
      assert.equal(attempts, 2);
      await waitFor(() => lines.filter((l) => /cannot listen/.test(l.msg)).length === 2);
      await close(taken);
      mock.timers.tick(BIND_RETRY_MS);
      await waitFor(() => s.server !== undefined);
      assert.equal(attempts, 3);
      mock.timers.reset();
      assert.equal((await get(port, "/")).body, "ok");
    } finally {
      mock.timers.reset();
      await s.close();
    }
  });
});

/** Polls on the event loop (the timers are faked, so no sleeping): real socket events must land. */
async function waitFor(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !cond(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(cond(), "condition never held");
}

describe("node services at start", () => {
  it("/healthz's lastUpdated is the start time before the first sync, not the zero time", async () => {
    const files = { read: async () => "0", write: async () => {} };
    const s = await NodeServices.start(
      parseNodeServicesOptions({ healthzBindAddress: "", metricsBindAddress: "", conntrackCleanup: false }),
      {
        mode: "nftables",
        families: ["IPv4"],
        syncPeriodMs: 30_000,
        healthCheckAddresses: [],
        log: pino({ level: "silent" }),
        sysctlFiles: files,
        now: () => Date.parse("2026-01-01T00:00:00Z"),
      },
    );
    try {
      // The node is not known eligible yet: 503, and the body's times are the recorded ones.
      const body = JSON.parse(healthAnswer(s.health.snapshot(), true).body) as {
        lastUpdated: string;
        status: { IPv4: { lastUpdated: string } };
      };
      assert.equal(body.lastUpdated, "2026-01-01T00:00:00.000Z");
      assert.equal(body.status.IPv4.lastUpdated, "2026-01-01T00:00:00.000Z");
    } finally {
      await s.close();
    }
  });
});
