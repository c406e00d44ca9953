// Global model objects ↔ globalv1 wire values. Each object goes out twice over: as kpng's
// messages (for kpng clients) and whole, field for field (the *Object messages), which is what
// this project's own `api` source reads back, so the model it rebuilds is exactly the one sent.

import { createHash } from "node:crypto";
import type {
  AddressType,
  EndpointSlice,
  IPFamily,
  Labels,
  Node,
  ObjectMeta,
  Protocol,
  Service,
  ServiceCIDR,
  ServiceType,
  TrafficPolicy,
} from "../model/kube.ts";
import {
  EndpointInfo,
  EndpointSliceInfo,
  type EndpointSliceObject,
  NodeInfo,
  type NodeObject,
  ServiceCIDRInfo,
  ServiceInfo,
  type ServiceObject,
  type ObjectMeta as WireMeta,
} from "./gen/api/globalv1/api.ts";
import { Protocol as WireProtocol, type Service as WireService } from "./gen/api/localv1/api.ts";
import { toIPSet } from "./ipset.ts";

/** kpng clients skip a value whose Hash did not change, so it must follow the content. */
function contentHash(bytes: Uint8Array): number {
  return createHash("sha256").update(bytes).digest().readUIntBE(0, 6) || 1;
}

function meta(m: ObjectMeta): WireMeta {
  return {
    Namespace: m.namespace,
    Name: m.name,
    Uid: m.uid,
    ResourceVersion: m.resourceVersion,
    Labels: { ...m.labels },
    Annotations: { ...m.annotations },
  };
}

function fromMeta(m: WireMeta | undefined): ObjectMeta {
  return {
    namespace: m?.Namespace ?? "",
    name: m?.Name ?? "",
    uid: m?.Uid ?? "",
    resourceVersion: m?.ResourceVersion ?? "",
    labels: { ...m?.Labels } as Labels,
    annotations: { ...m?.Annotations } as Labels,
  };
}

const wireProtocol: Record<Protocol, WireProtocol> = {
  TCP: WireProtocol.TCP,
  UDP: WireProtocol.UDP,
  SCTP: WireProtocol.SCTP,
};

function kpngService(s: Service): WireService {
  const clusterIPs = s.clusterIPs.filter((ip) => ip !== "" && ip !== "None");
  return {
    Namespace: s.metadata.namespace,
    Name: s.metadata.name,
    Type: s.type,
    Labels: {},
    Annotations: {},
    IPs: {
      ClusterIPs: toIPSet(clusterIPs),
      ExternalIPs: toIPSet(s.externalIPs),
      LoadBalancerIPs: toIPSet(s.loadBalancerIngress.map((i) => i.ip).filter((ip) => ip !== "")),
      Headless: s.clusterIP === "None",
    },
    IPFilters:
      s.loadBalancerSourceRanges.length > 0
        ? [{ TargetIPs: undefined, SourceRanges: [...s.loadBalancerSourceRanges] }]
        : [],
    MapIP: false,
    Ports: s.ports.map((p) => ({
      Name: p.name,
      Protocol: wireProtocol[p.protocol],
      Port: p.port,
      NodePort: p.nodePort,
      TargetPort: typeof p.targetPort === "number" ? p.targetPort : 0,
      TargetPortName: typeof p.targetPort === "string" ? p.targetPort : "",
      HasEndpoints: false,
      HasIPv4Endpoints: false,
      HasIPv6Endpoints: false,
    })),
    ExternalTrafficToLocal: s.externalTrafficPolicy === "Local",
    InternalTrafficToLocal: s.internalTrafficPolicy === "Local",
    SessionAffinity:
      s.sessionAffinity === "ClientIP"
        ? { $case: "ClientIP", value: { TimeoutSeconds: s.sessionAffinityTimeoutSeconds } }
        : undefined,
    HealthCheckNodePort: s.healthCheckNodePort,
    LocalReadyEndpoints: 0,
    ClusterIPsOrdered: [],
    ExternalIPsOrdered: [],
    LoadBalancerIPsOrdered: [],
  };
}

function serviceObject(s: Service): ServiceObject {
  return {
    Metadata: meta(s.metadata),
    Type: s.type,
    ClusterIP: s.clusterIP,
    ClusterIPs: [...s.clusterIPs],
    IPFamilies: [...s.ipFamilies],
    ExternalIPs: [...s.externalIPs],
    LoadBalancerSourceRanges: [...s.loadBalancerSourceRanges],
    LoadBalancerIngress: s.loadBalancerIngress.map((i) => ({
      IP: i.ip,
      Hostname: i.hostname,
      IPMode: i.ipMode ?? "",
    })),
    SessionAffinity: s.sessionAffinity,
    SessionAffinityTimeoutSeconds: s.sessionAffinityTimeoutSeconds,
    ExternalTrafficPolicy: s.externalTrafficPolicy,
    InternalTrafficPolicy: s.internalTrafficPolicy,
    HealthCheckNodePort: s.healthCheckNodePort,
    Ports: s.ports.map((p) => ({
      Name: p.name,
      Protocol: p.protocol,
      Port: p.port,
      NodePort: p.nodePort,
      TargetPort:
        typeof p.targetPort === "number"
          ? { $case: "TargetPortNumber", value: p.targetPort }
          : { $case: "TargetPortName", value: p.targetPort },
    })),
  };
}

export function encodeServiceInfo(s: Service): Uint8Array {
  const info: ServiceInfo = { Hash: 0, Service: kpngService(s), Object: serviceObject(s) };
  info.Hash = contentHash(ServiceInfo.encode(info).finish());
  return ServiceInfo.encode(info).finish();
}

export function decodeServiceInfo(bytes: Uint8Array): Service {
  const o = ServiceInfo.decode(bytes).Object;
  if (o === undefined) throw new Error("ServiceInfo without Object (not sent by a kpng TypeScript brain)");
  return {
    kind: "Service",
    metadata: fromMeta(o.Metadata),
    type: o.Type as ServiceType,
    clusterIP: o.ClusterIP,
    clusterIPs: o.ClusterIPs,
    ipFamilies: o.IPFamilies as IPFamily[],
    externalIPs: o.ExternalIPs,
    loadBalancerSourceRanges: o.LoadBalancerSourceRanges,
    loadBalancerIngress: o.LoadBalancerIngress.map((i) => ({
      ip: i.IP,
      hostname: i.Hostname,
      ipMode: i.IPMode === "" ? undefined : (i.IPMode as "VIP" | "Proxy"),
    })),
    sessionAffinity: o.SessionAffinity as "None" | "ClientIP",
    sessionAffinityTimeoutSeconds: o.SessionAffinityTimeoutSeconds,
    externalTrafficPolicy: o.ExternalTrafficPolicy as TrafficPolicy,
    internalTrafficPolicy: o.InternalTrafficPolicy as TrafficPolicy,
    healthCheckNodePort: o.HealthCheckNodePort,
    ports: o.Ports.map((p) => ({
      name: p.Name,
      protocol: p.Protocol as Protocol,
      port: p.Port,
      nodePort: p.NodePort,
      targetPort: p.TargetPort?.value ?? "",
    })),
  };
}

function sliceObject(s: EndpointSlice): EndpointSliceObject {
  return {
    Metadata: meta(s.metadata),
    AddressType: s.addressType,
    ServiceName: s.serviceName,
    Ports: s.ports.map((p) => ({
      Name: p.name ?? undefined,
      Protocol: p.protocol,
      Port: p.port ?? undefined,
    })),
    Endpoints: s.endpoints.map((e) => ({
      Addresses: [...e.addresses],
      Ready: e.conditions.ready ?? undefined,
      Serving: e.conditions.serving ?? undefined,
      Terminating: e.conditions.terminating ?? undefined,
      Hostname: e.hostname,
      NodeName: e.nodeName,
      Zone: e.zone,
      ZoneHints: [...e.zoneHints],
      NodeHints: [...e.nodeHints],
      PodName: e.podName,
    })),
  };
}

export function encodeEndpointSliceInfo(s: EndpointSlice): Uint8Array {
  const info: EndpointSliceInfo = { Hash: 0, Object: sliceObject(s) };
  info.Hash = contentHash(EndpointSliceInfo.encode(info).finish());
  return EndpointSliceInfo.encode(info).finish();
}

export function decodeEndpointSliceInfo(bytes: Uint8Array): EndpointSlice {
  const o = EndpointSliceInfo.decode(bytes).Object;
  if (o === undefined) throw new Error("EndpointSliceInfo without Object");
  return {
    kind: "EndpointSlice",
    metadata: fromMeta(o.Metadata),
    addressType: o.AddressType as AddressType,
    serviceName: o.ServiceName,
    ports: o.Ports.map((p) => ({
      name: p.Name ?? null,
      protocol: p.Protocol as Protocol,
      port: p.Port ?? null,
    })),
    endpoints: o.Endpoints.map((e) => ({
      addresses: e.Addresses,
      conditions: { ready: e.Ready ?? null, serving: e.Serving ?? null, terminating: e.Terminating ?? null },
      hostname: e.Hostname,
      nodeName: e.NodeName,
      zone: e.Zone,
      zoneHints: e.ZoneHints,
      nodeHints: e.NodeHints,
      podName: e.PodName,
    })),
  };
}

/** kpng's per-endpoint values of one slice, keyed by the endpoint's addresses. */
export function encodeEndpointInfos(s: EndpointSlice): Map<string, Uint8Array> {
  const out = new Map<string, Uint8Array>();
  for (const e of s.endpoints) {
    let key = e.addresses.join(",");
    for (let n = 2; out.has(key); n++) key = `${e.addresses.join(",")}#${n}`;
    const info: EndpointInfo = {
      Hash: 0,
      Namespace: s.metadata.namespace,
      SourceName: s.metadata.name,
      ServiceName: s.serviceName,
      Endpoint: {
        Hostname: e.hostname,
        IPs: toIPSet(e.addresses),
        Local: false,
        PortOverrides: s.ports.flatMap((p) =>
          p.name !== null && p.port !== null ? [{ Name: p.name, Port: p.port }] : [],
        ),
        Scopes: undefined,
        Conditions: undefined,
        PortScopes: [],
      },
      Conditions: {
        Ready: e.conditions.ready ?? true,
        Serving: e.conditions.serving ?? true,
        Terminating: e.conditions.terminating ?? false,
      },
      PodName: e.podName,
      Topology: { Node: e.nodeName, Zone: e.zone },
      Hints: { Zones: [...e.zoneHints].sort(), Nodes: [...e.nodeHints].sort() },
    };
    info.Hash = contentHash(EndpointInfo.encode(info).finish());
    out.set(key, EndpointInfo.encode(info).finish());
  }
  return out;
}

const kpngNodeLabels = [
  "kubernetes.io/hostname",
  "topology.kubernetes.io/zone",
  "topology.kubernetes.io/region",
];

function nodeObject(n: Node): NodeObject {
  return {
    Metadata: meta(n.metadata),
    Addresses: n.addresses.map((a) => ({ Type: a.type, Address: a.address })),
    PodCIDRs: [...n.podCIDRs],
  };
}

export function encodeNodeInfo(n: Node): Uint8Array {
  const labels: Record<string, string> = {};
  for (const k of kpngNodeLabels) {
    const v = n.metadata.labels[k];
    if (v !== undefined) labels[k] = v;
  }
  const info: NodeInfo = {
    Hash: 0,
    Node: {
      Name: n.metadata.name,
      Topology: { Node: n.metadata.name, Zone: n.metadata.labels["topology.kubernetes.io/zone"] ?? "" },
      Labels: labels,
      Annotations: {},
    },
    Object: nodeObject(n),
  };
  info.Hash = contentHash(NodeInfo.encode(info).finish());
  return NodeInfo.encode(info).finish();
}

export function decodeNodeInfo(bytes: Uint8Array): Node {
  const o = NodeInfo.decode(bytes).Object;
  if (o === undefined) throw new Error("NodeInfo without Object");
  return {
    kind: "Node",
    metadata: fromMeta(o.Metadata),
    addresses: o.Addresses.map((a) => ({ type: a.Type, address: a.Address })),
    podCIDRs: o.PodCIDRs,
  };
}

export function encodeServiceCIDRInfo(o: ServiceCIDR): Uint8Array {
  return ServiceCIDRInfo.encode({ Metadata: meta(o.metadata), CIDRs: [...o.cidrs] }).finish();
}

export function decodeServiceCIDRInfo(bytes: Uint8Array): ServiceCIDR {
  const o = ServiceCIDRInfo.decode(bytes);
  return { kind: "ServiceCIDR", metadata: fromMeta(o.Metadata), cidrs: o.CIDRs };
}
