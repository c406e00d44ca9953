// Wiring of the start-up check for a kube-proxy DaemonSet (src/kube-proxy-compat/rival-proxy.ts)
// for the kube source with a kernel backend: one GET with the source's kubeconfig, in the
// background, so that a slow or forbidden request never delays the start.

import { warnIfKubeProxyRuns } from "../kube-proxy-compat/rival-proxy.ts";
import type { Logger } from "../observability/log.ts";

interface Connection {
  readonly kubeconfig?: string | undefined;
  readonly context?: string | undefined;
  readonly master?: string | undefined;
}

export function checkForKubeProxy(connection: Connection, log: Logger): void {
  const run = async () => {
    const [{ loadKubeConfig }, { KubeConfigRequester }] = await Promise.all([
      import("../kube/kubeconfig.ts"),
      import("../kube/request.ts"),
    ]);
    const requester = new KubeConfigRequester(loadKubeConfig(connection).config);
    await warnIfKubeProxyRuns((path) => requester.send({ method: "GET", path }), log);
  };
  run().catch((err: unknown) =>
    log.info({ err: (err as Error).message }, "could not check for a kube-proxy DaemonSet"),
  );
}
