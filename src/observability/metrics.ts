// The process-wide Prometheus registry. Components register their metrics here; the /metrics
// endpoint (`sendMetrics` in http-listen.ts) serves it.

import { Counter, Gauge, Histogram, Registry } from "prom-client";

export const registry = new Registry();

export const invalidObjectsTotal = new Counter({
  name: "kpng_invalid_objects_total",
  help: "Kubernetes objects skipped because a field failed validation, by kind and source.",
  labelNames: ["kind", "source"] as const,
  registers: [registry],
});

/** A counter in the process registry; `collect` runs before each scrape reads it. */
export function counter<L extends string = never>(
  name: string,
  help: string,
  labelNames: readonly L[] = [],
  collect?: () => Promise<void>,
): Counter<L> {
  return new Counter({ name, help, labelNames, registers: [registry], ...(collect ? { collect } : {}) });
}

/** A gauge in the process registry. */
export function gauge<L extends string = never>(
  name: string,
  help: string,
  labelNames: readonly L[] = [],
): Gauge<L> {
  return new Gauge({ name, help, labelNames, registers: [registry] });
}

/** A histogram in the process registry. */
export function histogram<L extends string = never>(
  name: string,
  help: string,
  buckets: readonly number[],
  labelNames: readonly L[] = [],
): Histogram<L> {
  return new Histogram({ name, help, buckets: [...buckets], labelNames, registers: [registry] });
}
