// What the kube-proxy cleanup removed and what failed, for the /metrics endpoint.

import { counter } from "../../observability/metrics.ts";

export const kubeProxyObjectsRemovedTotal = counter(
  "kpng_kube_proxy_leftovers_removed_total",
  "Objects kube-proxy left in the kernel that kpng removed, by kind (iptables chain and rule, nft table, IPVS virtual server, interface, ipset).",
  ["kind"],
);

export const kubeProxyCleanupFailuresTotal = counter(
  "kpng_kube_proxy_cleanup_failures_total",
  "Steps of the kube-proxy cleanup that failed, by tool.",
  ["tool"],
);
