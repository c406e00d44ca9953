// Which endpoints one service port may use on this node, in one family: kube-proxy's
// CategorizeEndpoints, including the serving+terminating fallback (KEP-1669).

import type { EndpointInfo } from "./endpoint-merge.ts";
import { availableForTopology, topologyModeFromHints } from "./topology.ts";

export interface PortPolicy {
  /** !iTP Local || the port is externally accessible (eTP Local short-circuits pod traffic to cluster endpoints). */
  readonly usesCluster: boolean;
  /** iTP Local || (eTP Local && the port is externally accessible). */
  readonly usesLocal: boolean;
}

interface Categorized {
  /** Ready endpoints allowed by topology, else every serving+terminating one; [] when not used. */
  readonly clusterEndpoints: readonly EndpointInfo[];
  /** Local ready endpoints, else local serving+terminating ones; [] when not used. */
  readonly localEndpoints: readonly EndpointInfo[];
  /** Some endpoint anywhere could take traffic: decides reject (none) against drop (none local). */
  readonly hasAnyEndpoints: boolean;
}

function usesServingTerminatingFallback(ep: EndpointInfo): boolean {
  return ep.serving && ep.terminating;
}

/** An endpoint without a node name is never local. */
export function isLocal(ep: EndpointInfo, nodeName: string): boolean {
  return ep.nodeName !== "" && ep.nodeName === nodeName;
}

export function categorizeEndpoints(
  endpoints: readonly EndpointInfo[],
  policy: PortPolicy,
  nodeName: string,
  zone: string,
): Categorized {
  let clusterEndpoints: readonly EndpointInfo[] = [];
  let hasAnyEndpoints = false;
  if (policy.usesCluster) {
    const mode = topologyModeFromHints(endpoints, nodeName, zone);
    clusterEndpoints = endpoints.filter((ep) => ep.ready && availableForTopology(ep, mode, nodeName, zone));
    // The fallback ignores topology: terminating endpoints are a last resort cluster-wide.
    if (clusterEndpoints.length === 0) clusterEndpoints = endpoints.filter(usesServingTerminatingFallback);
    hasAnyEndpoints = clusterEndpoints.length > 0;
  }
  if (!policy.usesLocal) return { clusterEndpoints, localEndpoints: [], hasAnyEndpoints };

  let hasLocalReady = false;
  let hasLocalServingTerminating = false;
  for (const ep of endpoints) {
    const local = isLocal(ep, nodeName);
    if (ep.ready) {
      hasAnyEndpoints = true;
      if (local) hasLocalReady = true;
    } else if (usesServingTerminatingFallback(ep)) {
      hasAnyEndpoints = true;
      if (local) hasLocalServingTerminating = true;
    }
  }
  let localEndpoints: readonly EndpointInfo[] = [];
  if (hasLocalReady) localEndpoints = endpoints.filter((ep) => isLocal(ep, nodeName) && ep.ready);
  else if (hasLocalServingTerminating) {
    localEndpoints = endpoints.filter((ep) => isLocal(ep, nodeName) && usesServingTerminatingFallback(ep));
  }
  return { clusterEndpoints, localEndpoints, hasAnyEndpoints };
}

/**
 * Why one endpoint is, or is not, in what categorizeEndpoints chose for a port. Each code names
 * the rule of the Kubernetes docs that decided it; see endpointReason.
 */
export type EndpointReasonCode =
  | "ready"
  | "serving-terminating-fallback"
  | "terminating-while-others-ready"
  | "not-ready"
  | "not-serving"
  | "other-node-local-policy"
  | "topology-other-zone"
  | "topology-other-node";

/**
 * The companion of categorizeEndpoints: `chosen` is what it returned for the traffic at hand
 * (clusterEndpoints, or localEndpoints under a Local policy); the answer names the rule that put
 * the endpoint in or left it out, read with the same predicates (isLocal, topology,
 * usesServingTerminatingFallback). `used` is membership in `chosen`, never decided again here.
 */
export function endpointReason(
  ep: EndpointInfo,
  chosen: readonly EndpointInfo[],
  local: boolean,
  endpoints: readonly EndpointInfo[],
  nodeName: string,
  zone: string,
): { readonly used: boolean; readonly code: EndpointReasonCode } {
  const used = chosen.includes(ep);
  if (used) return { used, code: ep.ready ? "ready" : "serving-terminating-fallback" };
  if (local && !isLocal(ep, nodeName)) return { used, code: "other-node-local-policy" };
  if (ep.ready) {
    const mode = topologyModeFromHints(endpoints, nodeName, zone);
    if (!availableForTopology(ep, mode, nodeName, zone))
      return { used, code: mode === "PreferSameNode" ? "topology-other-node" : "topology-other-zone" };
  }
  if (usesServingTerminatingFallback(ep)) return { used, code: "terminating-while-others-ready" };
  return { used, code: ep.serving ? "not-ready" : "not-serving" };
}
