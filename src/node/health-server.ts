// `/healthz` and `/livez` with kube-proxy's semantics and bodies: /healthz is 200 only when the
// proxy keeps up and the node is eligible (not being deleted, not tainted for deletion by the
// cluster autoscaler); /livez ignores eligibility (KEP-3836), so a node being drained does not
// restart the proxy.

import type { Server } from "node:http";
import { listen, sendJson } from "../observability/http-listen.ts";
import { counter } from "../observability/metrics.ts";
import type { HealthSnapshot, ProxyHealth } from "./proxy-health.ts";

const healthzTotal = counter("kubeproxy_proxy_healthz_total", "/healthz answers, by HTTP status code.", [
  "code",
]);

const livezTotal = counter("kubeproxy_proxy_livez_total", "/livez answers, by HTTP status code.", ["code"]);

/** Go's zero time, which kube-proxy prints before the first sync. */
const ZERO_TIME = "0001-01-01T00:00:00Z";

const iso = (ms: number | undefined): string => (ms === undefined ? ZERO_TIME : new Date(ms).toISOString());

interface HealthAnswer {
  readonly status: 200 | 503;
  readonly body: string;
}

/** The answer to /healthz (withNode) or /livez, from one snapshot. */
export function healthAnswer(s: HealthSnapshot, withNode: boolean): HealthAnswer {
  const ok = s.healthy && (!withNode || s.nodeEligible);
  const status: Record<string, { lastUpdated: string; healthy: boolean }> = {};
  for (const [family, f] of s.families)
    status[family] = { lastUpdated: iso(f.lastUpdated), healthy: f.healthy };
  const body = {
    // kube-proxy reports the current time as lastUpdated when healthy, for older probes.
    lastUpdated: iso(ok ? s.now : s.lastUpdated),
    currentTime: iso(s.now),
    ...(withNode ? { nodeEligible: s.nodeEligible } : {}),
    healthy: s.healthy,
    status,
  };
  return { status: ok ? 200 : 503, body: JSON.stringify(body) };
}

export function startHealthServer(
  host: string,
  port: number,
  health: Pick<ProxyHealth, "snapshot">,
): Promise<Server> {
  return listen(host, port, (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/healthz" && path !== "/livez") {
      res.writeHead(404, { "Content-Type": "text/plain" }).end("404 page not found\n");
      return;
    }
    const withNode = path === "/healthz";
    const answer = healthAnswer(health.snapshot(), withNode);
    (withNode ? healthzTotal : livezTotal).inc({ code: String(answer.status) });
    sendJson(res, answer.status, answer.body);
  });
}
