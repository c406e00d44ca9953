// Reflector metrics: what arrives, how often a watch had to start over, what went wrong, and how
// long ago each resource last heard from the API server (a stuck watch shows as a growing age).

import { Gauge } from "prom-client";
import { counter, registry } from "../observability/metrics.ts";

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
