// The metrics port (--metrics-bind-address), with kube-proxy's paths:
//   /metrics    the process registry, Prometheus text format, with process_* and nodejs_*
//   /proxyMode  the backend's mode name ("nftables", "iptables")
//   /healthz    "ok" while the process serves (kube-proxy's ping check on this port)
//   /configz    the effective configuration as JSON, when the process runs as kube-proxy
//   /flagz      the command line, one flag a line
// and with --profiling, the runtime's profiles in place of Go's /debug/pprof:
//   /debug/pprof/heap           a V8 heap snapshot (.heapsnapshot, for Chrome DevTools)
//   /debug/pprof/profile?seconds=N   a V8 CPU profile of N seconds (default 30, at most 300)

import type { Server, ServerResponse } from "node:http";
import { Session } from "node:inspector/promises";
import { collectDefaultMetrics } from "prom-client";
import { listen, sendMetrics } from "../observability/http-listen.ts";
import { registry } from "../observability/metrics.ts";

interface ComponentDocuments {
  readonly configz: Readonly<Record<string, unknown>> | undefined;
  readonly flagz: readonly string[];
}

let documents: ComponentDocuments = { configz: undefined, flagz: process.argv.slice(2) };

/** What /configz and /flagz answer: set once at start by `kpng kube-proxy`. */
export function publishComponentDocuments(
  config: Readonly<Record<string, unknown>>,
  flags: readonly string[],
): void {
  documents = { configz: config, flagz: flags };
}

interface MetricsServerOptions {
  readonly profiling?: boolean;
}

const MAX_PROFILE_SECONDS = 300;

let processMetrics = false;

/**
 * How often the event loop's delay is sampled for nodejs_eventloop_lag_*. Node's default, 10 ms,
 * wakes an idle proxy 100 times a second: 1.1% of a core, most of what kpng costs when nothing
 * changes. At 100 ms every stall long enough to hold up a sync is still seen.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/** kube-proxy exports process_* (CPU, memory, open fds, start time): so does kpng, once. */
function collectProcessMetrics(): void {
  if (processMetrics) return;
  processMetrics = true;
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
}

export function startMetricsServer(
  host: string,
  port: number,
  proxyMode: string,
  options: MetricsServerOptions = {},
): Promise<Server> {
  collectProcessMetrics();
  return listen(host, port, (req, res) => {
    const url = new URL(req.url ?? "/", "http://metrics");
    const text = (status: number, body: string) =>
      res
        .writeHead(status, {
          "Content-Type": "text/plain; charset=utf-8",
          "X-Content-Type-Options": "nosniff",
        })
        .end(body);
    switch (url.pathname) {
      case "/proxyMode":
        return text(200, proxyMode);
      case "/healthz":
        return text(200, "ok");
      case "/flagz":
        return text(200, documents.flagz.map((f) => `${f}\n`).join(""));
      case "/configz":
        if (documents.configz === undefined) return text(404, "404 page not found\n");
        res.writeHead(200, { "Content-Type": "application/json" });
        return res.end(JSON.stringify({ "kubeproxy.config.k8s.io": documents.configz }));
      case "/metrics":
        return sendMetrics(res);
    }
    if (options.profiling === true && url.pathname.startsWith("/debug/pprof/")) {
      const seconds = Math.min(Number(url.searchParams.get("seconds") ?? 30) || 30, MAX_PROFILE_SECONDS);
      profile(url.pathname.slice("/debug/pprof/".length), seconds, res).catch((err: unknown) => {
        if (!res.headersSent) text(500, `${String(err)}\n`);
        else res.destroy();
      });
      return;
    }
    text(404, "404 page not found\n");
  });
}

/** A heap snapshot or a CPU profile of the running process, through the inspector protocol. */
async function profile(kind: string, seconds: number, res: ServerResponse): Promise<void> {
  const session = new Session();
  session.connect();
  try {
    if (kind === "heap") {
      res.writeHead(200, {
        "Content-Type": "application/json",
        "Content-Disposition": 'attachment; filename="kpng.heapsnapshot"',
      });
      session.on("HeapProfiler.addHeapSnapshotChunk", (m) => res.write(m.params.chunk));
      await session.post("HeapProfiler.takeHeapSnapshot", { reportProgress: false });
      res.end();
      return;
    }
    if (kind !== "profile") {
      res.writeHead(404, { "Content-Type": "text/plain" }).end("404 page not found\n");
      return;
    }
    await session.post("Profiler.enable");
    await session.post("Profiler.start");
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    const { profile: cpu } = await session.post("Profiler.stop");
    res.writeHead(200, {
      "Content-Type": "application/json",
      "Content-Disposition": 'attachment; filename="kpng.cpuprofile"',
    });
    res.end(JSON.stringify(cpu));
  } finally {
    session.disconnect();
  }
}
