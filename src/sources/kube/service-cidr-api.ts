// Which ServiceCIDR API the cluster serves: networking.k8s.io/v1 (GA in Kubernetes 1.33), else
// v1beta1, else none (an older cluster, or one without the feature: its Service ranges then come
// from --service-cidrs or stay unknown). Asked once, before the ServiceCIDR reflector starts.

import { reflectorErrorsTotal } from "../../kube/metrics.ts";
import type { KubeTransport } from "../../kube/transport.ts";
import { Backoff, type BackoffOptions, DEFAULT_BACKOFF } from "../../lib/backoff.ts";
import { sleep } from "../../lib/sleep.ts";
import type { Logger } from "../../observability/log.ts";

/** The collection paths, most preferred first. */
export const SERVICE_CIDR_PATHS = [
  "/apis/networking.k8s.io/v1/servicecidrs",
  "/apis/networking.k8s.io/v1beta1/servicecidrs",
] as const;

interface ServiceCIDRApiOptions {
  readonly transport: KubeTransport;
  readonly log: Logger;
  readonly signal: AbortSignal;
  /** Each probe is aborted after this long and retried. */
  readonly timeoutMs: number;
  readonly backoff?: BackoffOptions;
}

/** What a probe of one path found: served, not served here, or a failure to retry. */
type Probe = "served" | "absent" | "forbidden";

async function probe(transport: KubeTransport, path: string, signal: AbortSignal): Promise<Probe> {
  const res = await transport.get(`${path}?limit=1`, signal);
  // The body is not needed; reading it lets the connection be reused.
  for await (const _ of res) {
  }
  if (res.statusCode === 200) return "served";
  if (res.statusCode === 404) return "absent";
  if (res.statusCode === 403) return "forbidden";
  throw new Error(`HTTP ${res.statusCode ?? "?"} ${res.statusMessage ?? ""}`.trim());
}

/**
 * The path to list and watch ServiceCIDRs at, or undefined when the cluster serves none (or we
 * may not read them: logged, since the ranges then stay empty). Failures are retried with backoff
 * until one answer or until `signal` aborts (then undefined).
 */
export async function findServiceCIDRPath(options: ServiceCIDRApiOptions): Promise<string | undefined> {
  const { transport, log, signal, timeoutMs } = options;
  const backoff = new Backoff(options.backoff ?? DEFAULT_BACKOFF);
  while (!signal.aborted) {
    try {
      for (const path of SERVICE_CIDR_PATHS) {
        const found = await probe(transport, path, AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]));
        if (found === "served") return path;
        if (found === "forbidden") {
          log.warn({ path }, "may not list ServiceCIDRs (RBAC); the Service ranges stay unknown");
          return undefined;
        }
      }
      log.info(
        "the cluster serves no ServiceCIDR API; the Service ranges stay unknown (see --service-cidrs)",
      );
      return undefined;
    } catch (err) {
      if (signal.aborted) break;
      reflectorErrorsTotal.inc({ resource: "servicecidrs", reason: "discovery" });
      const delayMs = backoff.next();
      log.warn(
        { err: (err as Error).message, retryInMs: delayMs },
        "cannot tell which ServiceCIDR API is served",
      );
      await sleep(delayMs, signal);
    }
  }
  return undefined;
}
