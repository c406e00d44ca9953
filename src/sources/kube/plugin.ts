// `kpng kube …`: the Kubernetes API as a source.

import type { Command } from "commander";
import { z } from "zod";
import type { ClusterSource } from "../../model/global.ts";
import type { SourceContext, SourcePlugin } from "../../plugin/contracts.ts";
import { durationFlag, parseOptionsWith, switchFlag } from "../../plugin/options.ts";

const optionalText = z
  .string()
  .optional()
  .transform((s) => (s === undefined || s.trim() === "" ? undefined : s.trim()));

const kubeOptions = z.object({
  kubeconfig: optionalText,
  context: optionalText,
  master: optionalText,
  serviceProxyName: optionalText,
  // --service-cidrs (every source's flag, checked by the CLI): when set, ServiceCIDRs are not read.
  serviceCidrs: optionalText,
  watchAllNodes: switchFlag,
  watchInactivityTimeout: durationFlag(1000, "a watch is reconnected after this much silence; use 1s or more")
    .optional()
    .default(60_000),
});

export type KubeSourceOptions = z.output<typeof kubeOptions>;

export const kubeSourcePlugin: SourcePlugin<KubeSourceOptions> = {
  name: "kube",
  description: "list and watch Services, EndpointSlices, Nodes and ServiceCIDRs from the Kubernetes API",
  addOptions(cmd: Command): void {
    cmd
      .option(
        "--kubeconfig <file>",
        "kubeconfig file (default: $KUBECONFIG, the pod's service account, ~/.kube/config)",
      )
      .option("--context <name>", "kubeconfig context to use (default: current-context)")
      .option("--master <url>", "API server URL; overrides the kubeconfig's server")
      .option(
        "--watch-all-nodes",
        "watch every Node, not only the one named by the sink's --node-name (always so with a global sink)",
        false,
      )
      .option(
        "--watch-inactivity-timeout <duration>",
        "reconnect a list or watch that receives no data (not even a bookmark) for this long",
        "60s",
      );
  },
  parseOptions: (raw) => parseOptionsWith(kubeOptions, raw),
  create(opts: KubeSourceOptions, ctx: SourceContext): ClusterSource {
    const inactivityTimeoutMs = opts.watchInactivityTimeout;
    // The Kubernetes client library is loaded only when this source runs: it costs every other
    // command (file sources, --help) half a second and tens of megabytes.
    let started: ClusterSource | undefined;
    return {
      async start(sink) {
        const [{ loadKubeConfig }, { KubeSource }, { KubeConfigTransport }] = await Promise.all([
          import("./kubeconfig.ts"),
          import("./source.ts"),
          import("./transport.ts"),
        ]);
        const log = ctx.log.child({ component: "kube-source" });
        const { config, origin } = loadKubeConfig({
          kubeconfig: opts.kubeconfig,
          context: opts.context,
          master: opts.master,
        });
        const transport = new KubeConfigTransport(config);
        // A local sink names the node to watch; a global sink serves many nodes, so every Node
        // is watched.
        const nodeName = opts.watchAllNodes ? undefined : ctx.nodeName;
        const serviceProxyName = opts.serviceProxyName;
        log.info(
          { server: transport.server, config: origin, nodeName: nodeName ?? "(all)", serviceProxyName },
          "kube source",
        );
        started = new KubeSource({
          transport,
          log,
          nodeName,
          serviceProxyName,
          // Ranges given on the command line replace the cluster's: no need to read them.
          watchServiceCIDRs: opts.serviceCidrs === undefined,
          timings: { inactivityTimeoutMs },
        });
        await started.start(sink);
      },
      async stop() {
        await started?.stop();
      },
    };
  },
};
