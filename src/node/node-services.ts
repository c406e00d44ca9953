// Everything that runs on the node beside a backend: the health and metrics servers, the
// healthCheckNodePort servers, conntrack cleanup and sysctls. A backend drives it through the
// SyncObserver it implements, so every backend gets the same services unchanged.

import { availableParallelism } from "node:os";
import { FD_LIMIT_BINARIES, raiseFdLimit } from "../host/fd-limit.ts";
import {
  KUBE_PROXY_CLEANUP_BINARIES,
  removeKubeProxyLeftovers,
} from "../host/kube-proxy-leftovers/cleanup.ts";
import { ExecCommandRunner } from "../host/kube-proxy-leftovers/command.ts";
import type { IPFamily } from "../model/kube.ts";
import type { LocalState } from "../model/local.ts";
import type { Logger } from "../observability/log.ts";
import { RetryingServer } from "./bind-retry.ts";
import { ConntrackCleaner } from "./conntrack/cleaner.ts";
import {
  CONNTRACK_BINARIES,
  type ConntrackRunner,
  conntrackMissing,
  ExecConntrackRunner,
} from "./conntrack/runner.ts";
import { applySysctls, conntrackSysctls, ProcSysctlFiles, type SysctlFiles } from "./conntrack/sysctls.ts";
import { HealthCheckNodePorts } from "./health-check-node-ports.ts";
import { startHealthServer } from "./health-server.ts";
import { startMetricsServer } from "./metrics-server.ts";
import type { NodeServicesFlags } from "./options.ts";
import { ProxyHealth } from "./proxy-health.ts";
import { type SharedServer, shareHealthServer, shareMetricsServer } from "./shared-servers.ts";
import type { SyncObserver, SyncOutcome } from "./sync-observer.ts";

/** The programs the node services may start: conntrack cleanup, kube-proxy's cleanup, prlimit. */
export const NODE_SERVICES_BINARIES: readonly string[] = [
  ...CONNTRACK_BINARIES,
  ...KUBE_PROXY_CLEANUP_BINARIES,
  ...FD_LIMIT_BINARIES,
];

interface NodeServicesContext {
  /** kube-proxy's name of the mode, as /proxyMode answers: "nftables", "iptables". */
  readonly mode: string;
  readonly families: readonly IPFamily[];
  /** The backend's periodic resync: the health timeout is twice it, as kube-proxy's. */
  readonly syncPeriodMs: number;
  /** Where healthCheckNodePort servers listen. */
  readonly healthCheckAddresses: readonly string[];
  readonly log: Logger;
  readonly conntrackRunner?: ConntrackRunner;
  readonly sysctlFiles?: SysctlFiles;
  readonly now?: () => number;
}

export class NodeServices implements SyncObserver {
  readonly health: ProxyHealth;
  readonly healthCheckNodePorts: HealthCheckNodePorts;
  readonly #cleaner: ConntrackCleaner | undefined;
  readonly #servers: SharedServer[] = [];
  readonly #log: Logger;

  private constructor(o: NodeServicesFlags, ctx: NodeServicesContext) {
    this.#log = ctx.log;
    this.health = new ProxyHealth({ families: ctx.families, timeoutMs: 2 * ctx.syncPeriodMs, now: ctx.now });
    this.healthCheckNodePorts = new HealthCheckNodePorts({
      addresses: ctx.healthCheckAddresses,
      proxyHealthy: () => this.health.snapshot().healthy,
      log: ctx.log,
    });
    this.#cleaner = o.conntrackCleanup
      ? new ConntrackCleaner(ctx.conntrackRunner ?? new ExecConntrackRunner(), ctx.log)
      : undefined;
  }

  /**
   * Removes kube-proxy's leftovers when asked, sets the sysctls and opens the servers; a server
   * that cannot listen is an error.
   */
  static async start(o: NodeServicesFlags, ctx: NodeServicesContext): Promise<NodeServices> {
    if (o.cleanupKubeProxy) {
      // Two proxies on one node fight over the same packets: kube-proxy's rules must go first.
      const report = await removeKubeProxyLeftovers(new ExecCommandRunner(), ctx.log);
      if (report.failures.length > 0)
        throw new Error(`kube-proxy cleanup failed: ${report.failures.join("; ")}`);
    }
    const s = new NodeServices(o, ctx);
    // As kube-proxy's sync loop does when it starts: healthy (and a real lastUpdated) while the
    // first sync waits for the API server, rather than the zero time.
    s.health.updated();
    await raiseFdLimit(ctx.log);
    if (o.conntrackCleanup && ctx.conntrackRunner === undefined) {
      const missing = await conntrackMissing();
      if (missing !== undefined)
        ctx.log.warn(
          { err: missing },
          "conntrack cannot run: stale UDP/SCTP flows will not be removed (install conntrack-tools, or pass --no-conntrack-cleanup)",
        );
    }
    await applySysctls(
      conntrackSysctls(o.conntrack, availableParallelism()),
      ctx.sysctlFiles ?? new ProcSysctlFiles(),
      ctx.log,
    );
    try {
      const retry = (what: string, a: { host: string; port: number }) => ({
        what,
        address: `${a.host}:${a.port}`,
        hardFail: o.bindAddressHardFail,
        log: ctx.log,
      });
      const { healthz, metrics } = o;
      // Several backends in one process share one server per address.
      if (healthz)
        s.#servers.push(
          await shareHealthServer(`${healthz.host}:${healthz.port}`, s.health, (combined) =>
            RetryingServer.start(
              () => startHealthServer(healthz.host, healthz.port, combined),
              retry("healthz", healthz),
            ),
          ),
        );
      if (metrics)
        s.#servers.push(
          await shareMetricsServer(`${metrics.host}:${metrics.port}`, () =>
            RetryingServer.start(
              () => startMetricsServer(metrics.host, metrics.port, ctx.mode, { profiling: o.profiling }),
              retry("metrics", metrics),
            ),
          ),
        );
    } catch (err) {
      await s.close();
      throw new Error(`cannot listen for /healthz or /metrics: ${(err as Error).message}`);
    }
    ctx.log.info(
      {
        healthz: o.healthz && `${o.healthz.host}:${o.healthz.port}`,
        metrics: o.metrics && `${o.metrics.host}:${o.metrics.port}`,
      },
      "node services listening",
    );
    return s;
  }

  queued(state: LocalState): void {
    this.health.setNodeEligible(state.nodeEligible ?? true);
    this.health.queued();
  }

  async synced(o: SyncOutcome): Promise<void> {
    this.health.updated();
    await this.healthCheckNodePorts.update(o.state);
    this.#cleaner?.cleanup(o.state);
  }

  failed(): void {}

  /** Closes every server; the rules stay as they are. */
  async close(): Promise<void> {
    await Promise.all([...this.#servers.splice(0).map((x) => x.leave()), this.healthCheckNodePorts.close()]);
    this.#log.info("node services closed");
  }
}
