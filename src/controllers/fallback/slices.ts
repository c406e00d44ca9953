// A Service's fallback pods → the EndpointSlices the controller keeps for them, built as the
// EndpointSlice controller would build them for pods its selector matched: one address per
// family the Service has, ports resolved per pod, pods grouped by resolved ports, at most
// MAX_ENDPOINTS_PER_SLICE endpoints per slice. Inactive slices carry the same endpoints with
// ready and serving false, so a proxy that knows nothing of fallback never sends traffic to them.

import { createHash } from "node:crypto";
import { FALLBACK_MANAGER, LABEL_FALLBACK_ACTIVE, LABEL_MANAGED_BY } from "../../model/fallback.ts";
import { familyOfAddress } from "../../model/ip.ts";
import { type IPFamily, LABEL_SERVICE_NAME, type Service } from "../../model/kube.ts";
import type { Pod } from "./pod.ts";
import { portsKey, type ResolvedPort, resolvePorts } from "./ports.ts";

export const MAX_ENDPOINTS_PER_SLICE = 100;

interface SliceEndpointSpec {
  readonly addresses: readonly [string];
  readonly conditions: { readonly ready: boolean; readonly serving: boolean; readonly terminating: boolean };
  readonly nodeName?: string;
  readonly zone?: string;
  readonly targetRef: {
    readonly kind: "Pod";
    readonly namespace: string;
    readonly name: string;
    readonly uid: string;
  };
}

/** The parts of an EndpointSlice the controller owns; what "changed" is decided on. */
export interface FallbackSliceSpec {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly addressType: IPFamily;
  readonly ports: readonly ResolvedPort[];
  readonly endpoints: readonly SliceEndpointSpec[];
}

/** The families a Service's endpoints are published for: its ipFamilies, else its cluster IP's. */
export function serviceFamilies(service: Service): IPFamily[] {
  if (service.ipFamilies.length > 0) return [...service.ipFamilies];
  return [familyOfAddress(service.clusterIP) ?? "IPv4"];
}

/** Stable names: the same family, ports and chunk always give the same slice name. */
function fallbackSliceName(service: string, family: IPFamily, ports: string, chunk: number): string {
  const hash = createHash("sha256").update(`${family}|${ports}|${chunk}`).digest("hex").slice(0, 10);
  return `${service}-fallback-${hash}`;
}

interface BuildInput {
  readonly service: Service;
  /** The pods the fallback selector matched, in the Service's namespace. */
  readonly pods: readonly Pod[];
  readonly zoneOf: (nodeName: string) => string;
  readonly active: boolean;
}

function endpointOf(pod: Pod, ip: string, input: BuildInput): SliceEndpointSpec {
  const zone = pod.nodeName === "" ? "" : input.zoneOf(pod.nodeName);
  return {
    addresses: [ip],
    conditions: input.active
      ? { ready: pod.ready && !pod.terminating, serving: pod.ready, terminating: pod.terminating }
      : { ready: false, serving: false, terminating: pod.terminating },
    ...(pod.nodeName !== "" && { nodeName: pod.nodeName }),
    ...(zone !== "" && { zone }),
    targetRef: {
      kind: "Pod",
      namespace: pod.metadata.namespace,
      name: pod.metadata.name,
      uid: pod.metadata.uid,
    },
  };
}

/** Sorted by name; pods that finished or have no address of a family are left out of it. */
export function buildFallbackSlices(input: BuildInput): FallbackSliceSpec[] {
  const { service } = input;
  const labels = {
    [LABEL_SERVICE_NAME]: service.metadata.name,
    [LABEL_MANAGED_BY]: FALLBACK_MANAGER,
    [LABEL_FALLBACK_ACTIVE]: input.active ? "true" : "false",
  };
  const pods = input.pods
    .filter((p) => !p.finished)
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
  const out: FallbackSliceSpec[] = [];
  for (const family of serviceFamilies(service)) {
    const groups = new Map<string, { ports: ResolvedPort[]; endpoints: SliceEndpointSpec[] }>();
    for (const pod of pods) {
      const ip = pod.ips.find((candidate) => familyOfAddress(candidate) === family);
      if (ip === undefined) continue;
      const ports = resolvePorts(service.ports, pod.ports);
      const key = portsKey(ports);
      let group = groups.get(key);
      if (group === undefined) {
        group = { ports, endpoints: [] };
        groups.set(key, group);
      }
      group.endpoints.push(endpointOf(pod, ip, input));
    }
    for (const [key, group] of groups) {
      for (let chunk = 0; chunk * MAX_ENDPOINTS_PER_SLICE < group.endpoints.length; chunk++) {
        out.push({
          name: fallbackSliceName(service.metadata.name, family, key, chunk),
          labels,
          addressType: family,
          ports: group.ports,
          endpoints: group.endpoints.slice(
            chunk * MAX_ENDPOINTS_PER_SLICE,
            (chunk + 1) * MAX_ENDPOINTS_PER_SLICE,
          ),
        });
      }
    }
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : 1));
}

/** The API object for a slice spec, owned by its Service (deleted with it by the garbage collector). */
export function toApiObject(spec: FallbackSliceSpec, service: Service, resourceVersion?: string): unknown {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: spec.name,
      namespace: service.metadata.namespace,
      labels: spec.labels,
      ...(resourceVersion !== undefined && { resourceVersion }),
      ownerReferences: [
        {
          apiVersion: "v1",
          kind: "Service",
          name: service.metadata.name,
          uid: service.metadata.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    addressType: spec.addressType,
    ports: spec.ports,
    endpoints: spec.endpoints,
  };
}
