// One HTTP server per healthCheckNodePort (LoadBalancer Services with externalTrafficPolicy
// Local), answering cloud load balancers as kube-proxy does: 200 when this node has local ready
// endpoints and the proxy is healthy, else 503. Servers follow the local state: they open and
// close as Services come and go. A port that cannot be bound is logged, counted and retried at
// the next update; it never stops the others.

import type { Server } from "node:http";
import { Counter, Gauge } from "prom-client";
import type { LocalState } from "../model/local.ts";
import type { Logger } from "../observability/log.ts";
import { registry } from "../observability/metrics.ts";
import { close, listen, sendJson } from "./http-listen.ts";

const bindFailures = new Counter({
  name: "kpng_healthcheck_nodeport_bind_failures_total",
  help: "healthCheckNodePort servers that could not listen (port taken, address missing); retried at the next sync.",
  registers: [registry],
});

const openServers = new Gauge({
  name: "kpng_healthcheck_nodeport_servers",
  help: "healthCheckNodePort ports being served.",
  registers: [registry],
});

export interface HealthCheckTarget {
  readonly namespace: string;
  readonly name: string;
  readonly localEndpoints: number;
}

/** The healthCheckNodePorts a state asks for; the first service wins a port two of them claim. */
export function healthCheckTargets(state: LocalState): Map<number, HealthCheckTarget> {
  const out = new Map<number, HealthCheckTarget>();
  for (const s of state.services.values()) {
    if (s.healthCheckNodePort <= 0 || out.has(s.healthCheckNodePort)) continue;
    out.set(s.healthCheckNodePort, {
      namespace: s.namespace,
      name: s.name,
      localEndpoints: s.localReadyEndpoints,
    });
  }
  return out;
}

/** The body and status kube-proxy answers for one service. */
export function healthCheckAnswer(
  t: HealthCheckTarget,
  proxyHealthy: boolean,
): { status: number; body: string } {
  const body = {
    service: { namespace: t.namespace, name: t.name },
    localEndpoints: t.localEndpoints,
    serviceProxyHealthy: proxyHealthy,
  };
  return {
    status: t.localEndpoints > 0 && proxyHealthy ? 200 : 503,
    body: JSON.stringify(body, null, "\t"),
  };
}

interface Served {
  target: HealthCheckTarget;
  readonly servers: Server[];
}

export interface HealthCheckNodePortsOptions {
  /** Addresses to listen on (the node-port addresses); ["0.0.0.0"] or ["::"] for all. */
  readonly addresses: readonly string[];
  readonly proxyHealthy: () => boolean;
  readonly log: Logger;
}

export class HealthCheckNodePorts {
  readonly #o: HealthCheckNodePortsOptions;
  readonly #served = new Map<number, Served>();

  constructor(options: HealthCheckNodePortsOptions) {
    this.#o = options;
  }

  /** The ports being served. */
  get ports(): number[] {
    return [...this.#served.keys()].sort((a, b) => a - b);
  }

  /** Opens, updates and closes servers to match `state`. Never throws. */
  async update(state: LocalState): Promise<void> {
    const wanted = healthCheckTargets(state);
    const closing: Promise<void>[] = [];
    for (const [port, served] of this.#served) {
      if (wanted.has(port)) continue;
      this.#served.delete(port);
      closing.push(...served.servers.map(close));
    }
    await Promise.all(closing);
    const opening: Promise<void>[] = [];
    for (const [port, target] of wanted) {
      const served = this.#served.get(port);
      if (served) served.target = target;
      else opening.push(this.#open(port, target));
    }
    await Promise.all(opening);
    openServers.set(this.#served.size);
  }

  async close(): Promise<void> {
    const all = [...this.#served.values()].flatMap((s) => s.servers);
    this.#served.clear();
    openServers.set(0);
    await Promise.all(all.map(close));
  }

  async #open(port: number, target: HealthCheckTarget): Promise<void> {
    const served: Served = { target, servers: [] };
    const handler = (_req: unknown, res: Parameters<typeof sendJson>[0]) => {
      const a = healthCheckAnswer(served.target, this.#o.proxyHealthy());
      sendJson(res, a.status, a.body, {
        "X-Load-Balancing-Endpoint-Weight": String(served.target.localEndpoints),
      });
    };
    const results = await Promise.allSettled(this.#o.addresses.map((host) => listen(host, port, handler)));
    const failed = results.find((r) => r.status === "rejected");
    const servers = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    if (failed) {
      // All addresses or none: a half-served port would answer some load balancers only.
      await Promise.all(servers.map(close));
      bindFailures.inc();
      this.#o.log.warn(
        { port, service: `${target.namespace}/${target.name}`, err: String(failed.reason) },
        "cannot serve healthCheckNodePort; retrying at the next sync",
      );
      return;
    }
    served.servers.push(...servers);
    this.#served.set(port, served);
  }
}
