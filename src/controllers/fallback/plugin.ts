// `kpng fallback-controller`: options, then wiring of the controller, leader election and the
// status server. Kube connection flags are the kube source's.

import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Command } from "commander";
import { z } from "zod";
import {
  addKubeConnectionOptions,
  addKubeRateLimitOptions,
  kubeConnectionFlags,
  kubeRateLimitFlags,
} from "../../kube/connection-flags.ts";
import type { HostPort } from "../../lib/host-port.ts";
import { parseStatusAddress } from "../../observability/status-server.ts";
import type { ControllerPlugin, RawOptions, RunContext } from "../../plugin/contracts.ts";
import { durationFlag, optionalText, parsedBy, parseOptionsWith } from "../../plugin/options.ts";

/** A leader-election period: a duration of at least 1ms. */
const period = (fallbackMs: number) =>
  durationFlag(1, "use a duration above 0, e.g. 2s").optional().default(fallbackMs);

/**
 * No limit unless asked: the controller writes one slice per switching Service, and a burst of
 * switches must not queue behind kube-proxy's 5 per second.
 */
const RATE_LIMIT = { qps: -1, burst: 10 };

const fallbackControllerFlags = z
  .object({
    ...kubeConnectionFlags,
    ...kubeRateLimitFlags(RATE_LIMIT),
    leaderElect: z.boolean().optional().default(true),
    leaderElectNamespace: optionalText,
    leaderElectLeaseName: optionalText.transform((name) => name ?? "kpng-fallback-controller"),
    leaderElectLeaseDuration: period(15_000),
    leaderElectRenewDeadline: period(10_000),
    leaderElectRetryPeriod: period(2_000),
    metricsAddress: optionalText.transform(parsedBy((text) => parseStatusAddress(text ?? "127.0.0.1:10260"))),
  })
  .superRefine((f, ctx) => {
    if (f.leaderElectRenewDeadline >= f.leaderElectLeaseDuration)
      ctx.addIssue({
        code: "custom",
        path: ["leaderElectRenewDeadline"],
        message: "must be shorter than --leader-elect-lease-duration",
      });
    else if (f.leaderElectRetryPeriod >= f.leaderElectRenewDeadline)
      ctx.addIssue({
        code: "custom",
        path: ["leaderElectRetryPeriod"],
        message: "must be shorter than --leader-elect-renew-deadline",
      });
  });

type FallbackControllerFlags = Omit<
  z.output<typeof fallbackControllerFlags>,
  "leaderElectNamespace" | "metricsAddress"
> & {
  /** The Lease's namespace: the flag, else $POD_NAMESPACE, else kube-system. */
  readonly leaderElectNamespace: string;
  readonly statusAddress: HostPort;
};

/** Throws UsageError naming the flag. */
export function parseFallbackControllerOptions(
  raw: RawOptions,
  env: Readonly<Record<string, string | undefined>> = process.env,
): FallbackControllerFlags {
  const { metricsAddress, ...f } = parseOptionsWith(fallbackControllerFlags, raw);
  return {
    ...f,
    leaderElectNamespace: f.leaderElectNamespace ?? env.POD_NAMESPACE ?? "kube-system",
    statusAddress: metricsAddress,
  };
}

async function run(o: FallbackControllerFlags, ctx: RunContext): Promise<void> {
  const [
    { loadKubeConfig },
    { KubeConfigTransport },
    { KubeConfigRequester },
    { FallbackController },
    { LeaderElector },
    { startStatusServer },
    { RateLimitedRequester, RateLimitedTransport, TokenBucket },
  ] = await Promise.all([
    import("../../kube/kubeconfig.ts"),
    import("../../kube/transport.ts"),
    import("../../kube/request.ts"),
    import("./controller.ts"),
    import("../leader.ts"),
    import("../../observability/status-server.ts"),
    import("../../kube/rate-limit.ts"),
  ]);
  const log = ctx.log.child({ component: "fallback-controller" });
  const { config, origin } = loadKubeConfig({
    kubeconfig: o.kubeconfig,
    context: o.context,
    master: o.master,
  });
  // One budget for every request the controller makes, as one client-go client.
  const bucket = new TokenBucket({ qps: o.kubeApiQps, burst: o.kubeApiBurst });
  const transport = new RateLimitedTransport(new KubeConfigTransport(config), bucket);
  const requester = new RateLimitedRequester(new KubeConfigRequester(config), bucket, transport.server);
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
        namespace: o.leaderElectNamespace,
        name: o.leaderElectLeaseName,
        identity: `${hostname()}_${randomBytes(4).toString("hex")}`,
        leaseDurationMs: o.leaderElectLeaseDuration,
        renewDeadlineMs: o.leaderElectRenewDeadline,
        retryPeriodMs: o.leaderElectRetryPeriod,
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

export const fallbackControllerPlugin: ControllerPlugin<FallbackControllerFlags> = {
  name: "fallback-controller",
  description: "keep fallback EndpointSlices for Services annotated with fallback.kpng.io/selector",
  addOptions(cmd: Command): void {
    addKubeConnectionOptions(cmd);
    addKubeRateLimitOptions(cmd, RATE_LIMIT);
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
