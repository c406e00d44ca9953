// One HTTP server per healthCheckNodePort (LoadBalancer Services with externalTrafficPolicy
// Local), answering cloud load balancers as kube-proxy does: 200 when this node has local ready
// endpoints and the proxy is healthy, else 503. Servers follow the local state: they open and
// close as Services come and go. A port that cannot be bound is logged, counted and retried at
// the next update; it never stops the others.

import type { Server } from "node:http";
import type { LocalService, LocalState } from "../model/local.ts";
import { serviceChanges } from "../model/local-changes.ts";
import { close, listen, sendJson } from "../observability/http-listen.ts";
import type { Logger } from "../observability/log.ts";
import { counter, gauge } from "../observability/metrics.ts";

const bindFailures = counter(
  "kpng_healthcheck_nodeport_bind_failures_total",
  "healthCheckNodePort servers that could not listen (port taken, address missing); retried at the next sync.",
);

const openServers = gauge("kpng_healthcheck_nodeport_servers", "healthCheckNodePort ports being served.");

interface HealthCheckTarget {
  readonly namespace: string;
  readonly name: string;
  readonly localEndpoints: number;
}

function targetOf(s: LocalService): HealthCheckTarget {
  return { namespace: s.namespace, name: s.name, localEndpoints: s.localReadyEndpoints };
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

interface HealthCheckNodePortsOptions {
  /** Addresses to listen on (the node-port addresses); ["0.0.0.0"] or ["::"] for all. */
  readonly addresses: readonly string[];
  readonly proxyHealthy: () => boolean;
  readonly log: Logger;
}

export class HealthCheckNodePorts {
  readonly #o: HealthCheckNodePortsOptions;
  readonly #served = new Map<number, Served>();
  /** Per port, the services that ask for it, in the order they asked: the first one is served. */
  readonly #claims = new Map<number, Map<string, HealthCheckTarget>>();
  /** The port each service asks for. */
  readonly #portOf = new Map<string, number>();
  /** Ports wanted but not bound (the bind failed): retried at every update. */
  readonly #unbound = new Set<number>();
  #last: LocalState | undefined;

  constructor(options: HealthCheckNodePortsOptions) {
    this.#o = options;
  }

  /** The ports being served. */
  get ports(): number[] {
    return [...this.#served.keys()].sort((a, b) => a - b);
  }

  /**
   * Opens, updates and closes servers to match `state`, looking only at the services that
   * changed since the last update (and at ports that could not be bound). Never throws.
   */
  async update(state: LocalState): Promise<void> {
    const touched = new Set(this.#unbound);
    if (this.#last === undefined) {
      // The first state, right after the first ruleset: nothing is claimed yet, so only the
      // services with a port are looked at (a walk of 100k Services, ahead of the next change).
      for (const [key, s] of state.services) if (s.healthCheckNodePort > 0) this.#claim(key, s, touched);
    } else {
      for (const [key, , after] of serviceChanges(this.#last, state)) {
        const old = this.#portOf.get(key);
        if (old !== undefined) {
          const claims = this.#claims.get(old);
          claims?.delete(key);
          if (claims?.size === 0) this.#claims.delete(old);
          this.#portOf.delete(key);
          touched.add(old);
        }
        if (after !== undefined && after.healthCheckNodePort > 0) this.#claim(key, after, touched);
      }
    }
    this.#last = state;
    const closing: Promise<void>[] = [];
    const opening: [number, HealthCheckTarget][] = [];
    for (const port of touched) {
      const target = this.#claims.get(port)?.values().next().value;
      const served = this.#served.get(port);
      this.#unbound.delete(port);
      if (target === undefined) {
        if (served === undefined) continue;
        this.#served.delete(port);
        closing.push(...served.servers.map(close));
      } else if (served !== undefined) served.target = target;
      else opening.push([port, target]);
    }
    await Promise.all(closing);
    await Promise.all(opening.map(([port, target]) => this.#open(port, target)));
    openServers.set(this.#served.size);
  }

  #claim(key: string, s: LocalService, touched: Set<number>): void {
    const port = s.healthCheckNodePort;
    let claims = this.#claims.get(port);
    if (claims === undefined) {
      claims = new Map();
      this.#claims.set(port, claims);
    }
    claims.set(key, targetOf(s));
    this.#portOf.set(key, port);
    touched.add(port);
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
      this.#unbound.add(port);
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
