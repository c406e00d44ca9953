// The process-wide Prometheus registry. Components register their metrics here; the /metrics
// endpoint (`sendMetrics` in http-listen.ts) serves it.

import { Counter, Registry } from "prom-client";

export const registry = new Registry();

export const invalidObjectsTotal = new Counter({
  name: "kpng_invalid_objects_total",
  help: "Kubernetes objects skipped because a field failed validation, by kind and source.",
  labelNames: ["kind", "source"] as const,
  registers: [registry],
});
