// The JSON form of the global model: every selected Service, EndpointSlice, Node and
// ServiceCIDR, sorted by key, with object keys sorted so equal states print equal documents.

import type { ClusterView } from "../../model/global.ts";
import type { KubeObject } from "../../model/kube.ts";
import { objectKey } from "../../model/kube.ts";

interface GlobalStateJson {
  readonly services: readonly unknown[];
  readonly endpointSlices: readonly unknown[];
  readonly nodes: readonly unknown[];
  readonly serviceCIDRs: readonly unknown[];
}

export function globalStateToJson(
  view: Pick<ClusterView, "services" | "slices" | "nodes" | "serviceCIDRObjects">,
): GlobalStateJson {
  return {
    services: sortedObjects(view.services()),
    endpointSlices: sortedObjects(view.slices()),
    nodes: sortedObjects(view.nodes()),
    serviceCIDRs: sortedObjects(view.serviceCIDRObjects()),
  };
}

function sortedObjects(objects: Iterable<KubeObject>): unknown[] {
  return [...objects]
    .map((o) => ({ key: objectKey(o.metadata), o }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .map(({ o }) => withSortedKeys(o));
}

/** A deep copy whose object keys are in sorted order (arrays keep their order). */
function withSortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withSortedKeys);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort())
    out[key] = withSortedKeys((value as Record<string, unknown>)[key]);
  return out;
}
