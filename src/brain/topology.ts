// Topology-aware routing from EndpointSlice hints, as kube-proxy decides it: one mode for the
// whole port, never a per-endpoint fallback.

import type { EndpointInfo } from "./endpoint-merge.ts";

type TopologyMode = "PreferSameNode" | "PreferSameZone" | "None";

/**
 * Only ready endpoints are considered. PreferSameNode when every one has a node hint and some
 * hint names this node; else PreferSameZone when every one has a zone hint and some hint names
 * this node's zone (a node without a zone label never matches); else no filtering.
 */
export function topologyModeFromHints(
  endpoints: readonly EndpointInfo[],
  nodeName: string,
  zone: string,
): TopologyMode {
  let allNodeHinted = true;
  let hintedForNode = false;
  let allZoneHinted = true;
  let hintedForZone = false;
  for (const ep of endpoints) {
    if (!ep.ready) continue;
    if (ep.nodeHints.length === 0) allNodeHinted = false;
    else if (ep.nodeHints.includes(nodeName)) hintedForNode = true;
    if (ep.zoneHints.length === 0) allZoneHinted = false;
    else if (zone !== "" && ep.zoneHints.includes(zone)) hintedForZone = true;
  }
  if (allNodeHinted && hintedForNode) return "PreferSameNode";
  if (allZoneHinted && hintedForZone) return "PreferSameZone";
  return "None";
}

export function availableForTopology(
  ep: EndpointInfo,
  mode: TopologyMode,
  nodeName: string,
  zone: string,
): boolean {
  switch (mode) {
    case "None":
      return true;
    case "PreferSameNode":
      return ep.nodeHints.includes(nodeName);
    case "PreferSameZone":
      return ep.zoneHints.includes(zone);
  }
}
