// The flags that say how to reach the API server, shared by the kube source and the controllers.

import type { Command } from "commander";

/** How to reach the API server: every command that talks to it takes these. */
export function addKubeConnectionOptions(cmd: Command): void {
  cmd
    .option(
      "--kubeconfig <file>",
      "kubeconfig file (default: $KUBECONFIG, the pod's service account, ~/.kube/config)",
    )
    .option("--context <name>", "kubeconfig context to use (default: current-context)")
    .option("--master <url>", "API server URL; overrides the kubeconfig's server");
}
