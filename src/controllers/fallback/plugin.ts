// `kpng fallback-controller`: options, then wiring of the controller, leader election and the
// status server. Kube connection flags are the kube source's.

import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Command } from "commander";
import { addKubeConnectionOptions } from "../../kube/connection-flags.ts";
import type { HostPort } from "../../lib/host-port.ts";
import type { ControllerPlugin, RunContext } from "../../plugin/contracts.ts";
import { parseDuration } from "../../plugin/duration.ts";
import { UsageError } from "../../plugin/usage-error.ts";
import { parseStatusAddress } from "../status-server.ts";

interface FallbackControllerOptions {
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
  readonly master: string | undefined;
  readonly leaderElect: boolean;
  readonly leaseNamespace: string;
  readonly leaseName: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly statusAddress: HostPort;
}

function text(raw: Record<string, unknown>, key: string): string | undefined {
  const value = raw[key];
  return typeof value === "string" && value !== "" ? value : undefined;
}

function duration(raw: Record<string, unknown>, key: string, flag: string, fallback: string): number {
  try {
    const ms = parseDuration(text(raw, key) ?? fallback);
    if (ms <= 0) throw new Error("must be more than 0");
    return ms;
  } catch (err) {
    throw new UsageError(`${flag}: ${(err as Error).message}`);
  }
}

/** Throws UsageError naming the flag. */
export function parseFallbackControllerOptions(
  raw: Record<string, unknown>,
  env: Readonly<Record<string, string | undefined>> = process.env,
): FallbackControllerOptions {
  const leaseDurationMs = duration(raw, "leaderElectLeaseDuration", "--leader-elect-lease-duration", "15s");
  const renewDeadlineMs = duration(raw, "leaderElectRenewDeadline", "--leader-elect-renew-deadline", "10s");
  const retryPeriodMs = duration(raw, "leaderElectRetryPeriod", "--leader-elect-retry-period", "2s");
  if (renewDeadlineMs >= leaseDurationMs) {
    throw new UsageError("--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration");
  }
  if (retryPeriodMs >= renewDeadlineMs) {
    throw new UsageError("--leader-elect-retry-period must be shorter than --leader-elect-renew-deadline");
  }
  let statusAddress: HostPort;
  try {
    statusAddress = parseStatusAddress(text(raw, "metricsAddress") ?? "127.0.0.1:10260");
  } catch (err) {
    throw new UsageError(`--metrics-address: ${(err as Error).message}`);
  }
  return {
    kubeconfig: text(raw, "kubeconfig"),
    context: text(raw, "context"),
    master: text(raw, "master"),
    leaderElect: raw.leaderElect !== false,
    leaseNamespace: text(raw, "leaderElectNamespace") ?? env.POD_NAMESPACE ?? "kube-system",
    leaseName: text(raw, "leaderElectLeaseName") ?? "kpng-fallback-controller",
    leaseDurationMs,
    renewDeadlineMs,
    retryPeriodMs,
    statusAddress,
  };
}

async function run(o: FallbackControllerOptions, ctx: RunContext): Promise<void> {
  const [
    { loadKubeConfig },
    { KubeConfigTransport },
    { KubeConfigRequester },
    { FallbackController },
    { LeaderElector },
    { startStatusServer },
  ] = await Promise.all([
    import("../../kube/kubeconfig.ts"),
    import("../../kube/transport.ts"),
    import("../../kube/request.ts"),
    import("./controller.ts"),
    import("../leader.ts"),
    import("../status-server.ts"),
    import("./metrics.ts"),
  ]);
  const log = ctx.log.child({ component: "fallback-controller" });
  const { config, origin } = loadKubeConfig({
    kubeconfig: o.kubeconfig,
    context: o.context,
    master: o.master,
  });
  const transport = new KubeConfigTransport(config);
  const requester = new KubeConfigRequester(config);
  log.info({ server: transport.server, config: origin, leaderElect: o.leaderElect }, "fallback controller");
  const controller = new FallbackController({ transport, requester, log });
  let synced = false;
  void controller.synced.then(() => {
    synced = true;
  });
  const status = await startStatusServer(o.statusAddress, () => synced);
  controller.start();
  const { fallbackLeader } = await import("./metrics.ts");
  const elector = o.leaderElect
    ? new LeaderElector({
        requester,
        namespace: o.leaseNamespace,
        name: o.leaseName,
        identity: `${hostname()}_${randomBytes(4).toString("hex")}`,
        leaseDurationMs: o.leaseDurationMs,
        renewDeadlineMs: o.renewDeadlineMs,
        retryPeriodMs: o.retryPeriodMs,
        log,
        onChange: (leading) => {
          fallbackLeader.set(leading ? 1 : 0);
          controller.setLeading(leading);
        },
      })
    : undefined;
  if (elector) elector.start();
  else {
    fallbackLeader.set(1);
    controller.setLeading(true);
  }
  await new Promise<void>((resolve) => {
    if (ctx.signal.aborted) resolve();
    ctx.signal.addEventListener("abort", () => resolve(), { once: true });
  });
  await elector?.stop();
  await controller.stop();
  await new Promise<void>((resolve) => status.close(() => resolve()));
}

export const fallbackControllerPlugin: ControllerPlugin<FallbackControllerOptions> = {
  name: "fallback-controller",
  description: "keep fallback EndpointSlices for Services annotated with fallback.kpng.io/selector",
  addOptions(cmd: Command): void {
    addKubeConnectionOptions(cmd);
    cmd
      .option("--leader-elect", "elect a leader on a Lease, so that replicas can run side by side (default)")
      .option("--no-leader-elect", "run without leader election (only one replica may run)")
      .option(
        "--leader-elect-namespace <ns>",
        "namespace of the leader Lease (default: $POD_NAMESPACE, else kube-system)",
      )
      .option("--leader-elect-lease-name <name>", "name of the leader Lease", "kpng-fallback-controller")
      .option(
        "--leader-elect-lease-duration <duration>",
        "how long a replica waits before taking over an unrenewed Lease",
        "15s",
      )
      .option(
        "--leader-elect-renew-deadline <duration>",
        "how long the leader keeps trying to renew before it stops leading",
        "10s",
      )
      .option("--leader-elect-retry-period <duration>", "how often the Lease is renewed or tried", "2s")
      .option("--metrics-address <host:port>", "where /metrics and /healthz are served", "127.0.0.1:10260");
  },
  parseOptions: (raw) => parseFallbackControllerOptions(raw),
  run,
};
