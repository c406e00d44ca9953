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
  /** By listen address. */
  readonly servers: Map<string, Server>;
  readonly handler: Parameters<typeof listen>[2];
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
  /** Where the servers listen; changed by listenOn(). */
  #addresses: readonly string[];

  constructor(options: HealthCheckNodePortsOptions) {
    this.#o = options;
    this.#addresses = options.addresses;
  }

  /**
   * The node's NodePort addresses changed: every port served is closed on the addresses that
   * went and opened on the new ones, and keeps answering on those that stay. Never throws.
   */
  async listenOn(addresses: readonly string[]): Promise<void> {
    this.#addresses = addresses;
    await Promise.all(
      [...this.#served].map(async ([port, served]) => {
        const gone = [...served.servers].filter(([host]) => !addresses.includes(host));
        for (const [host] of gone) served.servers.delete(host);
        await Promise.all(gone.map(([, server]) => close(server)));
        await this.#complete(port, served);
      }),
    );
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
    const completing: [number, Served][] = [];
    for (const port of touched) {
      const target = this.#claims.get(port)?.values().next().value;
      const served = this.#served.get(port);
      this.#unbound.delete(port);
      if (target === undefined) {
        if (served === undefined) continue;
        this.#served.delete(port);
        closing.push(...[...served.servers.values()].map(close));
      } else if (served !== undefined) {
        served.target = target;
        completing.push([port, served]);
      } else opening.push([port, target]);
    }
    await Promise.all(closing);
    await Promise.all(opening.map(([port, target]) => this.#open(port, target)));
    await Promise.all(completing.map(([port, served]) => this.#complete(port, served)));
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
    const all = [...this.#served.values()].flatMap((s) => [...s.servers.values()]);
    this.#served.clear();
    openServers.set(0);
    await Promise.all(all.map(close));
  }

  async #open(port: number, target: HealthCheckTarget): Promise<void> {
    const served: Served = {
      target,
      servers: new Map(),
      handler: (_req, res) => {
        const a = healthCheckAnswer(served.target, this.#o.proxyHealthy());
        sendJson(res, a.status, a.body, {
          "X-Load-Balancing-Endpoint-Weight": String(served.target.localEndpoints),
        });
      },
    };
    const hosts = this.#addresses;
    const results = await Promise.allSettled(hosts.map((host) => listen(host, port, served.handler)));
    const failed = results.find((r) => r.status === "rejected");
    const servers = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    if (failed) {
      // All addresses or none: a half-served port would answer some load balancers only.
      await Promise.all(servers.map(close));
      this.#bindFailed(port, target, failed.reason);
      return;
    }
    for (const [i, host] of hosts.entries()) served.servers.set(host, servers[i] as Server);
    this.#served.set(port, served);
  }

  /** Opens a served port on the addresses it does not listen on yet (listenOn); a failure is retried. */
  async #complete(port: number, served: Served): Promise<void> {
    const missing = this.#addresses.filter((host) => !served.servers.has(host));
    await Promise.all(
      missing.map(async (host) => {
        try {
          served.servers.set(host, await listen(host, port, served.handler));
        } catch (err) {
          this.#bindFailed(port, served.target, err);
        }
      }),
    );
  }

  #bindFailed(port: number, target: HealthCheckTarget, err: unknown): void {
    bindFailures.inc();
    this.#unbound.add(port);
    this.#o.log.warn(
      { port, service: `${target.namespace}/${target.name}`, err: String(err) },
      "cannot serve healthCheckNodePort; retrying at the next sync",
    );
  }
}
