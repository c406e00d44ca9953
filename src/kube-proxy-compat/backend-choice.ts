// Which kpng backend serves a kube-proxy `mode`. The one place that knows it: when a backend is
// added, its mode gets a line here.

import { UsageError } from "../plugin/usage-error.ts";

export type ProxyMode = "nftables" | "iptables";

export interface BackendChoice {
  readonly mode: ProxyMode;
  /** The local sink that runs it, e.g. "to-nft". */
  readonly sink: string;
}

export function backendForMode(mode: string): BackendChoice {
  switch (mode) {
    case "nftables":
      return { mode: "nftables", sink: "to-nft" };
    case "":
    case "iptables":
      return { mode: "iptables", sink: "to-iptables" };
    case "ipvs":
      throw new UsageError(
        "mode: ipvs: kpng has no IPVS backend (IPVS mode is deprecated upstream since Kubernetes 1.35); use mode: nftables, its replacement",
      );
    case "kernelspace":
      throw new UsageError("mode: kernelspace is the Windows proxy; kpng runs on Linux only");
    default:
      throw new UsageError(`mode: unknown proxy mode ${JSON.stringify(mode)}; kpng serves mode: nftables`);
  }
}
