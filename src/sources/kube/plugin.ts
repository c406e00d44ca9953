// `kpng kube …`: the Kubernetes API as a source.

import { type Command, InvalidArgumentError, Option } from "commander";
import type { ClusterSource } from "../../model/global.ts";
import type { Options, RunContext, SourcePlugin } from "../../plugin/contracts.ts";
import { parseDuration } from "../../plugin/duration.ts";

function optionalString(opts: Options, name: string): string | undefined {
  const value = opts[name];
  return typeof value === "string" && value !== "" ? value : undefined;
}

function durationArgument(value: string): number {
  try {
    return parseDuration(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

export const kubeSourcePlugin: SourcePlugin = {
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
      .addOption(
        new Option(
          "--watch-inactivity-timeout <duration>",
          "reconnect a list or watch that receives no data (not even a bookmark) for this long",
        )
          .argParser(durationArgument)
          .default(60_000, "60s"),
      );
  },
  create(opts: Options, ctx: RunContext): ClusterSource {
    const inactivityTimeoutMs =
      typeof opts.watchInactivityTimeout === "number" ? opts.watchInactivityTimeout : 60_000;
    if (inactivityTimeoutMs <= 0) throw new Error("--watch-inactivity-timeout must be more than 0");
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
          kubeconfig: optionalString(opts, "kubeconfig"),
          context: optionalString(opts, "context"),
          master: optionalString(opts, "master"),
        });
        const transport = new KubeConfigTransport(config);
        // `opts` merges the sink's options: a local sink's --node-name is the node to watch. A
        // global sink has none and serves many nodes, so every Node is watched.
        const nodeName = opts.watchAllNodes === true ? undefined : optionalString(opts, "nodeName");
        const serviceProxyName = optionalString(opts, "serviceProxyName");
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
