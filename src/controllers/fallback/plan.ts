// Existing fallback slices + the desired ones → the writes that make them equal, and nothing
// when they already are (a resync writes nothing).

import type { EndpointSlice } from "../../model/kube.ts";
import { firstAddress } from "../../model/slice-endpoint.ts";
import type { FallbackSliceSpec } from "./slices.ts";

export type SliceWrite =
  | { readonly verb: "create"; readonly spec: FallbackSliceSpec }
  | { readonly verb: "update"; readonly spec: FallbackSliceSpec; readonly resourceVersion: string }
  | { readonly verb: "delete"; readonly name: string; readonly resourceVersion: string };

/** What the controller owns of a slice, as one comparable string. */
function fingerprintOf(
  labels: Readonly<Record<string, string>>,
  addressType: string,
  ports: readonly { name: string | null; protocol: string; port: number | null }[],
  endpoints: readonly (readonly [string, boolean, boolean, boolean, string, string, string])[],
): string {
  return JSON.stringify([
    Object.entries(labels).sort(),
    addressType,
    ports.map((p) => [p.name, p.protocol, p.port]),
    endpoints,
  ]);
}

function desiredFingerprint(spec: FallbackSliceSpec): string {
  return fingerprintOf(
    spec.labels,
    spec.addressType,
    spec.ports,
    spec.endpoints.map((e) => [
      e.addresses[0],
      e.conditions.ready,
      e.conditions.serving,
      e.conditions.terminating,
      e.nodeName ?? "",
      e.zone ?? "",
      e.targetRef.name,
    ]),
  );
}

function existingFingerprint(slice: EndpointSlice): string {
  return fingerprintOf(
    slice.metadata.labels,
    slice.addressType,
    slice.ports,
    slice.endpoints.map((e) => [
      firstAddress(e) ?? "",
      e.conditions.ready !== false,
      e.conditions.serving !== false,
      e.conditions.terminating === true,
      e.nodeName,
      e.zone,
      e.podName,
    ]),
  );
}

/** Creates and updates first (sorted by name), deletes last. */
export function planWrites(
  existing: readonly EndpointSlice[],
  desired: readonly FallbackSliceSpec[],
): SliceWrite[] {
  const byName = new Map(existing.map((s) => [s.metadata.name, s]));
  const writes: SliceWrite[] = [];
  for (const spec of desired) {
    const current = byName.get(spec.name);
    byName.delete(spec.name);
    if (current === undefined) writes.push({ verb: "create", spec });
    else if (existingFingerprint(current) !== desiredFingerprint(spec)) {
      writes.push({ verb: "update", spec, resourceVersion: current.metadata.resourceVersion });
    }
  }
  for (const stale of [...byName.values()].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1))) {
    writes.push({
      verb: "delete",
      name: stale.metadata.name,
      resourceVersion: stale.metadata.resourceVersion,
    });
  }
  return writes;
}
