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

import { canonicalIP, cidrContains } from "../model/ip.ts";
import type { IPFamily } from "../model/kube.ts";
import { type LocalEndpoint, type LocalService, ofFamily } from "../model/local.ts";
import type { NodeAddresses } from "./family-settings.ts";

type PlanProtocol = "tcp" | "udp" | "sctp";

/** An endpoint as the kernel sees it: canonical address, target port. */
export interface PlanEndpoint {
  readonly ip: string;
  readonly port: number;
}

/** How ClusterIP traffic from outside the pod network is masqueraded before DNAT. */
type ClusterMasquerade = "all" | "non-pods" | "none";

export interface PortPlan {
  /** namespace/name/protocol/port: what identifies the port inside one family's rules. */
  readonly id: string;
  /** `namespace/name:portName` (or the port number): for comments. */
  readonly label: string;
  readonly protocol: PlanProtocol;
  readonly port: number;
  readonly clusterIP: string;
  /** 0 when the port has no node port or this family takes no NodePort traffic. */
  readonly nodePort: number;
  readonly externalIPs: readonly string[];
  readonly loadBalancerIPs: readonly string[];
  /** Where ClusterIP traffic goes; empty: it meets `noEndpoints`. */
  readonly internal: readonly PlanEndpoint[];
  /** Where NodePort, externalIP and LB traffic goes; empty: it meets `noEndpoints`. */
  readonly external: readonly PlanEndpoint[];
  /** The same endpoints in the same order: one balancing over them serves both kinds. */
  readonly externalSameAsInternal: boolean;
  /** What traffic that no endpoint serves meets. */
  readonly noEndpoints: "reject" | "drop";
  /**
   * Whether NodePort/externalIP/LB traffic enters an external path at all: some endpoint serves
   * it, or eTP Local short-circuits it. False: it only meets `noEndpoints`.
   */
  readonly servesExternal: boolean;
  /** eTP Cluster: external traffic is masqueraded; eTP Local keeps the client IP. */
  readonly masqueradeExternal: boolean;
  /**
   * eTP Local with internal endpoints: traffic from pods (unmasqueraded) and from the node
   * (masqueraded) goes to the internal endpoints instead of the local external ones, as kube-proxy does.
   */
  readonly shortCircuit: boolean;
  readonly clusterMasquerade: ClusterMasquerade;
  /** ClientIP affinity timeout; 0: none. */
  readonly affinitySeconds: number;
  /** loadBalancerSourceRanges when the port has LB IPs and ranges in any family; else undefined. */
  readonly allowList?: AllowList;
}

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

function endpointsOf(eps: readonly LocalEndpoint[], family: IPFamily): PlanEndpoint[] {
  return ofFamily(eps, family).map((ep) => ({ ip: canonicalIP(ep.ip), port: ep.port }));
}

function addressesOf(ips: readonly string[], family: IPFamily): string[] {
  return ofFamily(ips, family).map(canonicalIP);
}

function sameEndpoints(a: readonly PlanEndpoint[], b: readonly PlanEndpoint[]): boolean {
  return a.length === b.length && a.every((ep, i) => ep.ip === b[i]?.ip && ep.port === b[i]?.port);
}

function servicePortId(ns: string, name: string, protocol: string, port: number): string {
  return `${ns}/${name}/${protocol.toLowerCase()}/${port}`;
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
  const clusterIP = ofFamily(svc.clusterIPs, family)[0];
  if (clusterIP === undefined) return undefined;
  const cip = canonicalIP(clusterIP);
  const externalIPs = addressesOf(svc.externalIPs, family);
  const loadBalancerIPs = addressesOf(svc.loadBalancerIPs, family);
  const allowList =
    loadBalancerIPs.length > 0 && svc.sourceRanges.length > 0
      ? allowListOf(svc.sourceRanges, loadBalancerIPs, family, node)
      : undefined;
  const clusterMasquerade: ClusterMasquerade = node.masqueradeAll
    ? "all"
    : node.podCIDRs.length > 0
      ? "non-pods"
      : "none";
  const local = svc.externalTrafficPolicy === "Local";
  const ports = svc.ports.map((port): PortPlan => {
    const internal = endpointsOf(port.internalEndpoints, family);
    const external = endpointsOf(port.externalEndpoints, family);
    const served = port.endpointFamilies.includes(family);
    return {
      id: servicePortId(svc.namespace, svc.name, port.protocol, port.port),
      label: `${svc.namespace}/${svc.name}:${port.name || port.port}`,
      protocol: port.protocol.toLowerCase() as PlanProtocol,
      port: port.port,
      clusterIP: cip,
      nodePort: node.nodePortCIDRs.length > 0 ? port.nodePort : 0,
      externalIPs,
      loadBalancerIPs,
      internal,
      external,
      externalSameAsInternal: sameEndpoints(internal, external),
      noEndpoints: served ? "drop" : "reject",
      servesExternal: served && (local || external.length > 0),
      masqueradeExternal: !local,
      shortCircuit: local && internal.length > 0,
      clusterMasquerade,
      affinitySeconds: svc.sessionAffinitySeconds,
      ...(allowList === undefined ? {} : { allowList }),
    };
  });
  return { clusterIP: cip, ports };
}

function allowListOf(
  ranges: readonly string[],
  loadBalancerIPs: readonly string[],
  family: IPFamily,
  node: NodeAddresses,
): AllowList {
  const sourceRanges = ofFamily(ranges, family);
  const holdsNode = sourceRanges.some((r) => node.nodeIPs.some((ip) => cidrContains(r, ip)));
  return { sourceRanges, loadBalancerIPs: holdsNode ? loadBalancerIPs : [] };
}

/** Whether the port takes any traffic besides its ClusterIP in this family. */
export function hasExternalAddresses(p: PortPlan): boolean {
  return p.nodePort > 0 || p.externalIPs.length > 0 || p.loadBalancerIPs.length > 0;
}

/** The port's externalIPs and LB IPs: the addresses external traffic is sent to. */
export function externalAddresses(p: PortPlan): string[] {
  return [...p.externalIPs, ...p.loadBalancerIPs];
}
