// What the fallback controller exposes on its metrics server.

import { Counter, Gauge } from "prom-client";
import { registry } from "../../observability/metrics.ts";

export const fallbackActive = new Gauge({
  name: "kpng_fallback_active",
  help: "1 while the Service is served by its fallback pods, 0 otherwise.",
  labelNames: ["namespace", "service"] as const,
  registers: [registry],
});

export const fallbackSwitchesTotal = new Counter({
  name: "kpng_fallback_switches_total",
  help: "Switches to (activated) or back from (deactivated) a Service's fallback pods.",
  labelNames: ["direction"] as const,
  registers: [registry],
});

export const fallbackWritesTotal = new Counter({
  name: "kpng_fallback_writes_total",
  help: "EndpointSlice writes by verb (create, update, delete).",
  labelNames: ["verb"] as const,
  registers: [registry],
});

export const fallbackWriteErrorsTotal = new Counter({
  name: "kpng_fallback_write_errors_total",
  help: "Failed API writes by verb and reason (conflict, http, network).",
  labelNames: ["verb", "reason"] as const,
  registers: [registry],
});

export const fallbackInvalidServicesTotal = new Counter({
  name: "kpng_fallback_invalid_annotations_total",
  help: "Services whose fallback annotations could not be read (a Warning event names the reason).",
  registers: [registry],
});

export const fallbackLeader = new Gauge({
  name: "kpng_fallback_leader",
  help: "1 while this replica holds the leader Lease.",
  registers: [registry],
});
