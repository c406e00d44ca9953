// The per-family port plan: for one Service in one IP family, everything a kernel backend needs
// to decide about each port, computed once from the local state and the node's addresses. A
// renderer only writes the plan down in its syntax (nft chains and maps, iptables rules), so the
// Service semantics below exist once for every backend:
// - addresses: the ClusterIP, the NodePort (when the family takes NodePort traffic), the
//   externalIPs and the load-balancer IPs of this family, canonical;
// - endpoints per traffic kind: internal (ClusterIP) and external (NodePort, externalIP, LB);
// - reject vs drop: traffic no endpoint serves is rejected (ICMP port unreachable) when the port
//   has no usable endpoint in this family anywhere in the cluster, and dropped when endpoints
//   exist but a Local traffic policy excludes them all from this node;
// - externalTrafficPolicy Local: external traffic keeps its client IP, and pod or node-local
//   sources short-circuit to the internal endpoints;
// - loadBalancerSourceRanges: the allow-list of this family, with the LB IPs themselves allowed
//   when a range holds one of the node's IPs (traffic the node sends to its own VIP);
// - ClientIP session affinity.

import { cidrContains } from "../model/ip.ts";
import type { IPFamily } from "../model/kube.ts";
import {
  hasSourceRanges,
  type LocalService,
  type LocalServiceFamily,
  type LocalServicePort,
  ofFamily,
  serviceFamily,
} from "../model/local.ts";
import { detectsLocalTraffic, type NodeAddresses } from "./family-settings.ts";

type PlanProtocol = "tcp" | "udp" | "sctp";

/** An endpoint as the kernel sees it: canonical address, target port. */
export interface PlanEndpoint {
  readonly ip: string;
  readonly port: number;
  /** Runs on this node. */
  readonly local: boolean;
  /** Its node is not known (it may run here). */
  readonly nodeUnknown?: boolean;
}

/**
 * Only a pod on this node can reach itself through a service here: endpoints on other nodes need
 * no hairpin handling; one whose node is unknown keeps it, as it may run here.
 */
export function mayHairpin(ep: PlanEndpoint): boolean {
  return ep.local || ep.nodeUnknown === true;
}

/** How ClusterIP traffic from outside the pod network is masqueraded before DNAT. */
type ClusterMasquerade = "all" | "non-pods" | "none";

interface AllowList {
  /** The ranges of this family (none: no source of this family is allowed). */
  readonly sourceRanges: readonly string[];
  /** LB IPs allowed as sources because a range holds a node IP. */
  readonly loadBalancerIPs: readonly string[];
}

/** One Service in one family: its ClusterIP there and one plan per port. */
interface ServicePlan {
  readonly clusterIP: string;
  readonly ports: readonly PortPlan[];
}

function sameEndpoints(a: readonly PlanEndpoint[], b: readonly PlanEndpoint[]): boolean {
  return a.length === b.length && a.every((ep, i) => ep.ip === b[i]?.ip && ep.port === b[i]?.port);
}

/**
 * The plan of a Service in one family, or undefined when the family's rules carry nothing for
 * it: as kube-proxy does, a family carries a Service only when it has a ClusterIP there.
 */
export function planService(
  svc: LocalService,
  family: IPFamily,
  node: NodeAddresses,
): ServicePlan | undefined {
  if (svc.type === "ExternalName") return undefined;
  const addresses = serviceFamily(svc, family);
  if (addresses === undefined) return undefined;
  const shared = sharedByPorts(svc, addresses, node);
  return {
    clusterIP: shared.clusterIP,
    ports: svc.ports.map((port) => planPort(svc, port, family, node, shared)),
  };
}

/** What every port of a Service has in common in one family. */
function sharedByPorts(svc: LocalService, addresses: LocalServiceFamily, node: NodeAddresses) {
  const { clusterIP, externalIPs, loadBalancerIPs } = addresses;
  const clusterMasquerade: ClusterMasquerade = node.masqueradeAll
    ? "all"
    : detectsLocalTraffic(node)
      ? "non-pods"
      : "none";
  return {
    clusterIP,
    externalIPs,
    loadBalancerIPs,
    externalAddresses: [...externalIPs, ...loadBalancerIPs],
    allowList: loadBalancerIPs.length > 0 && hasSourceRanges(svc) ? allowListOf(addresses, node) : undefined,
    clusterMasquerade,
  };
}

function planPort(
  svc: LocalService,
  port: LocalServicePort,
  family: IPFamily,
  node: NodeAddresses,
  shared: ReturnType<typeof sharedByPorts>,
) {
  const internal: PlanEndpoint[] = ofFamily(port.internalEndpoints, family);
  const external: PlanEndpoint[] = ofFamily(port.externalEndpoints, family);
  const served = port.endpointFamilies.includes(family);
  const local = svc.externalTrafficPolicy === "Local";
  const nodePort = node.nodePortCIDRs.length > 0 ? port.nodePort : 0;
  return {
    /** namespace/name/protocol/port: what identifies the port inside one family's rules. */
    id: `${svc.namespace}/${svc.name}/${port.protocol.toLowerCase()}/${port.port}`,
    /** `namespace/name:portName` (or the port number): for comments. */
    label: `${svc.namespace}/${svc.name}:${port.name || port.port}`,
    protocol: port.protocol.toLowerCase() as PlanProtocol,
    port: port.port,
    clusterIP: shared.clusterIP,
    /** 0 when the port has no node port or this family takes no NodePort traffic. */
    nodePort,
    externalIPs: shared.externalIPs,
    loadBalancerIPs: shared.loadBalancerIPs,
    /** The externalIPs, then the LB IPs: where external traffic other than NodePort arrives. */
    externalAddresses: shared.externalAddresses,
    /** Whether the port takes any traffic besides its ClusterIP in this family. */
    takesExternal: nodePort > 0 || shared.externalAddresses.length > 0,
    /** Where ClusterIP traffic goes; empty: it meets `noEndpoints`. */
    internal,
    /** Where NodePort, externalIP and LB traffic goes; empty: it meets `noEndpoints`. */
    external,
    /** The same endpoints in the same order: one balancing over them serves both kinds. */
    externalSameAsInternal: sameEndpoints(internal, external),
    /**
     * What traffic no endpoint serves meets: rejected when the port has no usable endpoint in
     * this family anywhere, dropped when a Local policy excludes the endpoints that exist.
     */
    noEndpoints: served ? "drop" : "reject",
    /**
     * Whether NodePort/externalIP/LB traffic enters an external path at all: some endpoint serves
     * it, or eTP Local short-circuits it. False: it only meets `noEndpoints`.
     */
    servesExternal: served && (local || external.length > 0),
    /** eTP Cluster: external traffic is masqueraded; eTP Local keeps the client IP. */
    masqueradeExternal: !local,
    /**
     * eTP Local with internal endpoints: traffic from pods (unmasqueraded) and from the node
     * (masqueraded) goes to the internal endpoints instead of the local external ones, as kube-proxy does.
     */
    shortCircuit: local && internal.length > 0,
    /** With shortCircuit: pods are told apart (--detect-local-mode), so their traffic short-circuits too. */
    shortCircuitPods: local && internal.length > 0 && detectsLocalTraffic(node),
    clusterMasquerade: shared.clusterMasquerade,
    /** ClientIP affinity timeout; 0: none. */
    affinitySeconds: svc.sessionAffinitySeconds,
    /** loadBalancerSourceRanges when the port has LB IPs and ranges in any family; else undefined. */
    allowList: shared.allowList,
  } as const;
}

/** One Service port in one family: everything a renderer writes down for it. */
export type PortPlan = ReturnType<typeof planPort>;

function allowListOf({ sourceRanges, loadBalancerIPs }: LocalServiceFamily, node: NodeAddresses): AllowList {
  const holdsNode = sourceRanges.some((r) => node.nodeIPs.some((ip) => cidrContains(r, ip)));
  return { sourceRanges, loadBalancerIPs: holdsNode ? loadBalancerIPs : [] };
}
