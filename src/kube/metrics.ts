// Reflector metrics: what arrives, how often a watch had to start over, what went wrong, and how
// long ago each resource last heard from the API server (a stuck watch shows as a growing age).

import { Gauge } from "prom-client";
import { counter, histogram, registry } from "../observability/metrics.ts";

export const watchEventsTotal = counter(
  "kpng_kube_watch_events_total",
  "Watch events received from the Kubernetes API, by resource and event type.",
  ["resource", "type"],
);

export const relistsTotal = counter(
  "kpng_kube_lists_total",
  "Complete lists of a resource, by reason (initial, expired, continue_expired, too_large_rv).",
  ["resource", "reason"],
);

export const reflectorErrorsTotal = counter(
  "kpng_kube_errors_total",
  "Errors while listing or watching, by resource and reason (network, http, decode, handler, inactive, too_large, deadline).",
  ["resource", "reason"],
);

export const resyncsTotal = counter(
  "kpng_kube_resyncs_total",
  "Periodic re-deliveries of a resource's cached objects (--config-sync-period), by resource.",
  ["resource"],
);

const lastEventAt = new Map<string, number>();

/** Called on every list page and watch event (bookmarks included). */
export function markActivity(resource: string, now = Date.now()): void {
  lastEventAt.set(resource, now);
}

// Registered by its construction; read only through the registry.
new Gauge({
  name: "kpng_kube_last_event_age_seconds",
  help: "Seconds since the last list response or watch event (bookmarks included) for a resource.",
  labelNames: ["resource"] as const,
  registers: [registry],
  collect() {
    const now = Date.now();
    for (const [resource, at] of lastEventAt) this.set({ resource }, (now - at) / 1000);
  },
});

// client-go's request metrics, under its names and labels, so that dashboards built for
// kube-proxy's API client read kpng's. A transport error counts under code "<error>".
const requestsTotal = counter(
  "rest_client_requests_total",
  "Number of HTTP requests to the Kubernetes API, partitioned by status code, method, and host.",
  ["code", "method", "host"],
);

const requestDuration = histogram(
  "rest_client_request_duration_seconds",
  "Request latency in seconds, by verb and host (for a watch: until its response headers).",
  [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60],
  ["verb", "host"],
);

/** Starts timing one request; call the result once with its status code, or undefined on error. */
export function requestStarted(
  method: string,
  url: URL,
  now: () => number = performance.now.bind(performance),
): (statusCode: number | undefined) => void {
  const started = now();
  let done = false;
  return (statusCode) => {
    if (done) return;
    done = true;
    const code = statusCode === undefined ? "<error>" : String(statusCode);
    requestsTotal.inc({ code, method, host: url.host });
    requestDuration.observe({ verb: method, host: url.host }, (now() - started) / 1000);
  };
}
