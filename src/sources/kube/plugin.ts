// `kpng kube …`: the Kubernetes API as a source.

import type { Command } from "commander";
import { z } from "zod";
import {
  addKubeConnectionOptions,
  addKubeRateLimitOptions,
  DEFAULT_BURST,
  DEFAULT_QPS,
  kubeConnectionFlags,
  kubeRateLimitFlags,
} from "../../kube/connection-flags.ts";
import {
  DEFAULT_LIST_TIMEOUT_MS,
  DEFAULT_MAX_LINE_BYTES,
  DEFAULT_MAX_LIST_BYTES,
} from "../../kube/limits.ts";
import type { ClusterSource } from "../../model/global.ts";
import type { SourceContext, SourcePlugin } from "../../plugin/contracts.ts";
import {
  durationFlag,
  optionalText,
  parseOptionsWith,
  switchFlag,
  wholeNumberFlag,
} from "../../plugin/options.ts";
import { EVERY_PROXY_NAME } from "./selectors.ts";

/** kube-proxy's default resync period. */
const DEFAULT_CONFIG_SYNC_PERIOD_MS = 15 * 60_000;

/** kube-proxy's client budget (client-go's defaults). */
const RATE_LIMIT = { qps: DEFAULT_QPS, burst: DEFAULT_BURST };

const kubeOptions = z.object({
  ...kubeConnectionFlags,
  ...kubeRateLimitFlags(RATE_LIMIT),
  serviceProxyName: optionalText,
  // --service-cidrs (every source's flag, checked by the CLI): when set, ServiceCIDRs are not read.
  serviceCidrs: optionalText,
  watchAllNodes: switchFlag,
  watchInactivityTimeout: durationFlag(1000, "a watch is reconnected after this much silence; use 1s or more")
    .optional()
    .default(60_000),
  maxWatchLineBytes: wholeNumberFlag(
    DEFAULT_MAX_LINE_BYTES,
    64 * 1024,
    "bytes",
    "a watch line holds one whole object",
  ),
  maxListBytes: wholeNumberFlag(
    DEFAULT_MAX_LIST_BYTES,
    1024 * 1024,
    "bytes",
    "a list page holds many whole objects",
  ),
  listTimeout: durationFlag(1000, "a list page must have time to arrive; use 1s or more")
    .optional()
    .default(DEFAULT_LIST_TIMEOUT_MS),
  configSyncPeriod: durationFlag(0, "").optional().default(DEFAULT_CONFIG_SYNC_PERIOD_MS),
});

type KubeSourceFlags = z.output<typeof kubeOptions>;

export const kubeSourcePlugin: SourcePlugin<KubeSourceFlags> = {
  name: "kube",
  description: "list and watch Services, EndpointSlices, Nodes and ServiceCIDRs from the Kubernetes API",
  addOptions(cmd: Command): void {
    addKubeConnectionOptions(cmd);
    addKubeRateLimitOptions(cmd, RATE_LIMIT);
    cmd
      .option(
        "--watch-all-nodes",
        "watch every Node, not only the one named by the sink's --node-name (always so with a global sink)",
        false,
      )
      .option(
        "--max-watch-line-bytes <bytes>",
        `largest watch event accepted (default ${DEFAULT_MAX_LINE_BYTES})`,
      )
      .option("--max-list-bytes <bytes>", `largest list page accepted (default ${DEFAULT_MAX_LIST_BYTES})`)
      .option("--list-timeout <duration>", "longest one list page request may take", "60s")
      .option(
        "--config-sync-period <duration>",
        "how often the cached objects are handed to the brain again, a safety net that changes nothing when all is well (0: never)",
        "15m",
      )
      .option(
        "--watch-inactivity-timeout <duration>",
        "reconnect a list or watch that receives no data (not even a bookmark) for this long",
        "60s",
      );
  },
  parseOptions: (raw) => parseOptionsWith(kubeOptions, raw),
  create(opts: KubeSourceFlags, ctx: SourceContext): ClusterSource {
    const inactivityTimeoutMs = opts.watchInactivityTimeout;
    // The Kubernetes client library is loaded only when this source runs: it costs every other
    // command (file sources, --help) half a second and tens of megabytes.
    let started: ClusterSource | undefined;
    return {
      async start(sink) {
        const [
          { loadKubeConfig },
          { KubeSource },
          { KubeConfigTransport },
          { RateLimitedTransport, TokenBucket },
        ] = await Promise.all([
          import("../../kube/kubeconfig.ts"),
          import("./source.ts"),
          import("../../kube/transport.ts"),
          import("../../kube/rate-limit.ts"),
        ]);
        const log = ctx.log.child({ component: "kube-source" });
        const { config, origin } = loadKubeConfig({
          kubeconfig: opts.kubeconfig,
          context: opts.context,
          master: opts.master,
        });
        const transport = new RateLimitedTransport(
          new KubeConfigTransport(config),
          new TokenBucket({ qps: opts.kubeApiQps, burst: opts.kubeApiBurst }),
        );
        // A local sink names the node to watch; a global sink serves many nodes, so every Node
        // is watched.
        const nodeName = opts.watchAllNodes ? undefined : ctx.nodeName;
        const serviceProxyName = ctx.everyProxyName ? EVERY_PROXY_NAME : opts.serviceProxyName;
        log.info(
          {
            server: transport.server,
            config: origin,
            nodeName: nodeName ?? "(all)",
            serviceProxyName,
            qps: opts.kubeApiQps,
            burst: opts.kubeApiBurst,
          },
          "kube source",
        );
        started = new KubeSource({
          transport,
          log,
          nodeName,
          serviceProxyName,
          // Ranges given on the command line replace the cluster's: no need to read them.
          watchServiceCIDRs: opts.serviceCidrs === undefined,
          resyncPeriodMs: opts.configSyncPeriod,
          timings: {
            inactivityTimeoutMs,
            maxLineBytes: opts.maxWatchLineBytes,
            maxListBytes: opts.maxListBytes,
            listTimeoutMs: opts.listTimeout,
          },
        });
        await started.start(sink);
      },
      async stop() {
        await started?.stop();
      },
    };
  },
};
