// Two proxies on one node fight over the same packets. `kubeadm upgrade apply` re-creates
// kube-proxy's DaemonSet unless its addon phase is skipped: at start, kpng looks for a DaemonSet
// in kube-system that runs kube-proxy's image with pods scheduled, and warns naming it.

import type { Logger } from "../observability/log.ts";

export const DAEMONSETS_PATH = "/apis/apps/v1/namespaces/kube-system/daemonsets";

const KUBE_PROXY_IMAGE = /(^|\/)kube-proxy(:|@|$)/;

interface DaemonSetLike {
  metadata?: { name?: string };
  spec?: { template?: { spec?: { containers?: { image?: string }[] } } };
  status?: { desiredNumberScheduled?: number; numberReady?: number };
}

/** The DaemonSets of a DaemonSetList that run kube-proxy's own image on some node. */
export function kubeProxyDaemonSets(list: unknown): string[] {
  const items = ((list as { items?: DaemonSetLike[] } | undefined)?.items ?? []).filter(
    (ds) =>
      (ds.spec?.template?.spec?.containers ?? []).some((c) => KUBE_PROXY_IMAGE.test(c.image ?? "")) &&
      (ds.status?.desiredNumberScheduled ?? 0) > 0,
  );
  return items.map((ds) => ds.metadata?.name ?? "?");
}

/** Never throws: an API error (e.g. no RBAC for DaemonSets) is an info line. */
export async function warnIfKubeProxyRuns(
  get: (path: string) => Promise<unknown>,
  log: Logger,
): Promise<void> {
  let names: string[];
  try {
    names = kubeProxyDaemonSets(await get(DAEMONSETS_PATH));
  } catch (err) {
    log.info({ err: (err as Error).message }, "could not check for a kube-proxy DaemonSet");
    return;
  }
  if (names.length > 0)
    log.warn(
      { daemonSets: names.map((n) => `kube-system/${n}`) },
      "kube-proxy runs beside kpng: both program the same Services; remove its DaemonSet (after `kubeadm upgrade apply`, skip the addon/kube-proxy phase: docs/migrating-from-kube-proxy.md)",
    );
}
