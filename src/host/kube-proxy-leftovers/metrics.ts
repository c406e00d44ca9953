// What the kube-proxy cleanup removed and what failed, for the /metrics endpoint.

import { Counter } from "prom-client";
import { registry } from "../../observability/metrics.ts";

export const kubeProxyObjectsRemovedTotal = new Counter({
  name: "kpng_kube_proxy_leftovers_removed_total",
  help: "Objects kube-proxy left in the kernel that kpng removed, by kind (iptables chain and rule, nft table, IPVS virtual server, interface, ipset).",
  labelNames: ["kind"] as const,
  registers: [registry],
});

export const kubeProxyCleanupFailuresTotal = new Counter({
  name: "kpng_kube_proxy_cleanup_failures_total",
  help: "Steps of the kube-proxy cleanup that failed, by tool.",
  labelNames: ["tool"] as const,
  registers: [registry],
});
