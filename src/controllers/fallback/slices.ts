// A Service's fallback pods → the EndpointSlices the controller keeps for them, built as the
// EndpointSlice controller would build them for pods its selector matched: one address per
// family the Service has, ports resolved per pod, pods grouped by resolved ports, at most
// MAX_ENDPOINTS_PER_SLICE endpoints per slice.
//
// The conditions say what a proxy that knows nothing of fallback (a stock kube-proxy) must do:
// - inactive: ready and serving false: it sends them nothing;
// - active: ready false, serving and terminating true: it uses them only while the Service has
//   no ready endpoint at all (KEP-1669), so the moment a primary endpoint is ready again it
//   sends everything there, with or without this controller, and never mixes the two sets.
// kpng reads the active label and treats serving as ready (src/brain/fallback.ts).

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

/**
 * Whether the pod serves the Service as its fallback: ready and not being deleted (a fallback pod
 * being deleted takes no new connection), or any pod when the Service publishes not-ready
 * addresses, as the EndpointSlice controller publishes them.
 */
export function servesAsFallback(pod: Pod, service: Service): boolean {
  if (pod.finished) return false;
  return service.publishNotReadyAddresses === true || (pod.ready && !pod.terminating);
}

function endpointOf(pod: Pod, ip: string, input: BuildInput): SliceEndpointSpec {
  const zone = pod.nodeName === "" ? "" : input.zoneOf(pod.nodeName);
  return {
    addresses: [ip],
    conditions: input.active
      ? { ready: false, serving: servesAsFallback(pod, input.service), terminating: true }
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
  // The Service's labels, as the EndpointSlice controller copies them; ours win.
  const labels = {
    ...service.metadata.labels,
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
