// The eBPF renderer: what one Service looks like in the maps. Pure: a Service (and the node's
// NodePort addresses) in, frontend groups out. A group is one backend list and the frontends that
// use it: per port and family, the cluster IPs (internal endpoints) and the external addresses
// (NodePorts on this node, externalIPs, load-balancer IPs). What is not rendered here is left to
// the nft rules of the same process: drops (a Local policy without a local endpoint, an address
// that no Service holds), load-balancer IPs with source ranges, SCTP.

import type { IPFamily } from "../../model/kube.ts";
import { familyEndpoints, type LocalService } from "../../model/local.ts";
import { type Backend, type Frontend, MAX_BACKENDS_PER_SERVICE } from "./layout.ts";

export interface RenderedGroup {
  /** Stable within its Service: which port, protocol, family and traffic the group serves. */
  readonly name: string;
  readonly frontends: readonly Frontend[];
  /** Empty when the group refuses (reject) or when nothing serves it. */
  readonly backends: readonly Backend[];
  /** The frontends refuse connections at once (ECONNREFUSED): nothing serves the port. */
  readonly reject: boolean;
  readonly affinitySeconds: number;
}

export interface RenderContext {
  /** This node's addresses that serve NodePorts (already filtered by --nodeport-addresses), per family. */
  readonly nodePortIPs: Readonly<Record<IPFamily, readonly string[]>>;
}

/** A node without NodePort addresses (dry runs, tests). */
export const NO_NODE_PORTS: RenderContext = { nodePortIPs: { IPv4: [], IPv6: [] } };

const NO_GROUPS: readonly RenderedGroup[] = Object.freeze([]);

/** The Service's groups, of every family or of `only` one (each family is synced on its own). */
export function renderService(
  svc: LocalService,
  ctx: RenderContext,
  only?: IPFamily,
): readonly RenderedGroup[] {
  // A single-stack cluster's other family renders nothing for any Service: its full sync at 100k
  // Services walks them all, and should make nothing for each.
  if (only !== undefined && !svc.families.some((f) => f.family === only)) return NO_GROUPS;
  const groups: RenderedGroup[] = [];
  for (const port of svc.ports) {
    if (port.protocol === "SCTP") continue; // sock_addr hooks see TCP and UDP only
    // Only the families the Service has a cluster IP in carry it (kube-proxy's per-family proxier).
    for (const { family, clusterIP, externalIPs, loadBalancerIPs, sourceRanges } of svc.families) {
      if (only !== undefined && family !== only) continue;
      const base = `${port.protocol}/${port.port}/${family}`;
      const addr = (ips: readonly string[], p: number) =>
        ips.map((ip) => ({ ip, port: p, protocol: port.protocol }));
      const hasAny = port.endpointFamilies.includes(family);
      const endpoints = familyEndpoints(port, family);
      const internal = group(`${base}/internal`, addr([clusterIP], port.port), endpoints.internal);
      if (internal) groups.push(internal);

      const external: Frontend[] = [
        ...addr(externalIPs, port.port),
        // Load-balancer IPs with source ranges are filtered by the nft rules.
        ...(sourceRanges.length > 0 ? [] : addr(loadBalancerIPs, port.port)),
        ...(port.nodePort > 0 ? addr(ctx.nodePortIPs[family], port.nodePort) : []),
      ];
      // Traffic from this node to an eTP Local address is known local: kube-proxy sends it to
      // the cluster-wide endpoints, which the internal list is.
      const ext = group(
        `${base}/external`,
        external,
        svc.externalTrafficPolicy === "Local" ? endpoints.internal : endpoints.external,
      );
      if (ext) groups.push(ext);

      function group(
        name: string,
        frontends: readonly Frontend[],
        eps: readonly Backend[],
      ): RenderedGroup | undefined {
        if (frontends.length === 0) return undefined;
        // The endpoints themselves serve as backends (address and port): no copy per endpoint.
        const backends = eps.length > MAX_BACKENDS_PER_SERVICE ? eps.slice(0, MAX_BACKENDS_PER_SERVICE) : eps;
        // Endpoints that exist but a policy excludes: the packet goes on unchanged, nft drops it.
        if (backends.length === 0 && hasAny) return undefined;
        return {
          name,
          frontends,
          backends,
          reject: backends.length === 0,
          affinitySeconds: svc.sessionAffinitySeconds,
        };
      }
    }
  }
  return groups;
}
