// What the fallback controller exposes on its metrics server.

import { counter, gauge } from "../../observability/metrics.ts";

export const fallbackActive = gauge(
  "kpng_fallback_active",
  "1 while the Service is served by its fallback pods, 0 otherwise.",
  ["namespace", "service"],
);

export const fallbackSwitchesTotal = counter(
  "kpng_fallback_switches_total",
  "Switches to (activated) or back from (deactivated) a Service's fallback pods.",
  ["direction"],
);

export const fallbackWritesTotal = counter(
  "kpng_fallback_writes_total",
  "EndpointSlice writes by verb (create, update, delete).",
  ["verb"],
);

export const fallbackWriteErrorsTotal = counter(
  "kpng_fallback_write_errors_total",
  "Failed API writes by verb and reason (conflict, http, network).",
  ["verb", "reason"],
);

export const fallbackInvalidServicesTotal = counter(
  "kpng_fallback_invalid_annotations_total",
  "Services whose fallback annotations could not be read (a Warning event names the reason).",
);

export const fallbackLeader = gauge("kpng_fallback_leader", "1 while this replica holds the leader Lease.");
