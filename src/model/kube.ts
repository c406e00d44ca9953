// The validated subset of core/v1 Service, discovery/v1 EndpointSlice, core/v1 Node and
// networking.k8s.io ServiceCIDR that a service proxy reads. Parsers in validate.ts turn raw API objects into these shapes; every
// field here has already been checked, so the brain never re-validates.

export type Protocol = "TCP" | "UDP" | "SCTP";
export type IPFamily = "IPv4" | "IPv6";
export type ServiceType = "ClusterIP" | "NodePort" | "LoadBalancer" | "ExternalName";
export type TrafficPolicy = "Cluster" | "Local";
export type AddressType = "IPv4" | "IPv6" | "FQDN";

export const LABEL_SERVICE_PROXY_NAME = "service.kubernetes.io/service-proxy-name";
export const LABEL_HEADLESS = "service.kubernetes.io/headless";
export const LABEL_SERVICE_NAME = "kubernetes.io/service-name";
export const LABEL_ZONE = "topology.kubernetes.io/zone";

export type Labels = Readonly<Record<string, string>>;

export interface ObjectMeta {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly labels: Labels;
  readonly annotations: Labels;
}

export interface ServicePort {
  readonly name: string;
  readonly protocol: Protocol;
  readonly port: number;
  /** 0 when the port has no node port. */
  readonly nodePort: number;
  /** A number, or a named port of the pods ("" when unset). */
  readonly targetPort: number | string;
}

export interface LoadBalancerIngress {
  readonly ip: string;
  readonly hostname: string;
  /** undefined means unset, which behaves as VIP. */
  readonly ipMode: "VIP" | "Proxy" | undefined;
}

export interface Service {
  readonly kind: "Service";
  readonly metadata: ObjectMeta;
  readonly type: ServiceType;
  /** "" or "None" for headless services. */
  readonly clusterIP: string;
  readonly clusterIPs: readonly string[];
  readonly ipFamilies: readonly IPFamily[];
  readonly externalIPs: readonly string[];
  /** As written in the spec: entries may carry whitespace, which the brain trims. */
  readonly loadBalancerSourceRanges: readonly string[];
  readonly loadBalancerIngress: readonly LoadBalancerIngress[];
  readonly sessionAffinity: "None" | "ClientIP";
  /** Only meaningful with ClientIP affinity; the API default is 10800. */
  readonly sessionAffinityTimeoutSeconds: number;
  readonly externalTrafficPolicy: TrafficPolicy;
  readonly internalTrafficPolicy: TrafficPolicy;
  readonly healthCheckNodePort: number;
  /** Set (true) only when the Service asks for it: endpoints are published ready whatever the pod's readiness. */
  readonly publishNotReadyAddresses?: true;
  readonly ports: readonly ServicePort[];
}

export interface EndpointConditions {
  /** null means unset; the proxy reads unset ready/serving as true and terminating as false. */
  readonly ready: boolean | null;
  readonly serving: boolean | null;
  readonly terminating: boolean | null;
}

/**
 * Validation makes an endpoint of one address a OneAddressEndpoint (slice-endpoint.ts), whose
 * `addresses` and hint lists are getters: read its address with firstAddress, and copy it with
 * withConditions rather than a spread.
 */
export interface SliceEndpoint {
  readonly addresses: readonly string[];
  readonly conditions: EndpointConditions;
  readonly hostname: string;
  readonly nodeName: string;
  readonly zone: string;
  readonly zoneHints: readonly string[];
  readonly nodeHints: readonly string[];
  /** Name of the Pod behind the endpoint when targetRef is a Pod, else "". */
  readonly podName: string;
}

export interface EndpointPort {
  /** null when the slice port has no name field; "" is a valid (unnamed) port name. */
  readonly name: string | null;
  readonly protocol: Protocol;
  /** null when unset. */
  readonly port: number | null;
}

export interface EndpointSlice {
  readonly kind: "EndpointSlice";
  readonly metadata: ObjectMeta;
  readonly addressType: AddressType;
  /** From the kubernetes.io/service-name label; "" when missing. */
  readonly serviceName: string;
  readonly ports: readonly EndpointPort[];
  readonly endpoints: readonly SliceEndpoint[];
  /**
   * inStrictAddressOrder(endpoints), when the reader knows it: it was found while the addresses
   * were read, and the brain then never reads them to merge the slice's ports. Unset in slices
   * built otherwise; a copy with other endpoints must not keep it.
   */
  readonly inAddressOrder?: boolean;
}

export interface NodeAddress {
  readonly type: string;
  readonly address: string;
}

export interface Node {
  readonly kind: "Node";
  readonly metadata: ObjectMeta;
  readonly addresses: readonly NodeAddress[];
  readonly podCIDRs: readonly string[];
  /**
   * Set (true) when the node is going away: it has a deletionTimestamp or the cluster
   * autoscaler's ToBeDeletedByClusterAutoscaler taint. Absent otherwise.
   */
  readonly beingDeleted?: true;
}

/** The taint the cluster autoscaler puts on a node it is about to remove. */
export const TAINT_TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler";

/** networking.k8s.io ServiceCIDR: one of the cluster's Service IP ranges (one CIDR per family). */
export interface ServiceCIDR {
  readonly kind: "ServiceCIDR";
  readonly metadata: ObjectMeta;
  /** Network address and prefix, one per family, as the API server requires them. */
  readonly cidrs: readonly string[];
}

export type KubeObject = Service | EndpointSlice | Node | ServiceCIDR;
export type KubeKind = KubeObject["kind"];

/** The key a store uses: "namespace/name", or the name alone for cluster-scoped objects. */
export function objectKey(meta: { readonly namespace: string; readonly name: string }): string {
  return meta.namespace === "" ? meta.name : namespacedKey(meta.namespace, meta.name);
}

/** The key of the Service an EndpointSlice belongs to (its service-name label). */
export function sliceServiceKey(slice: EndpointSlice): string {
  return namespacedKey(slice.metadata.namespace, slice.serviceName);
}

/**
 * "namespace/name" as one string. Joined with `+` or a template, V8 keeps the text as a pair of
 * parts (a rope), and a map keeps that key for as long as the object lives: two more objects
 * per key than the text alone, which every collection visits (at 100k Services, 600k of them).
 * Array#join writes the text out once.
 */
function namespacedKey(namespace: string, name: string): string {
  return [namespace, name].join("/");
}
