// LocalService ↔ localv1 wire values. A service travels as one Service value plus one Endpoint
// value per endpoint IP (key "namespace/service/<ip>"): the IP is unique per endpoint and
// family, unlike kpng's pod name, so a dual-stack pod gives two values that never collide.

import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { canonicalIP, familyOf } from "../model/ip.ts";
import type { IPFamily, Protocol as KubeProtocol, ServiceType } from "../model/kube.ts";
import {
  acrossFamilies,
  clusterIPsOf,
  hasSourceRanges,
  type LocalEndpoint,
  type LocalService,
  type LocalServiceFamily,
  type LocalServicePort,
  serviceFamily,
  withFamilyEndpoints,
} from "../model/local.ts";
import { compareAddresses, compareEndpoints } from "../model/order.ts";
import {
  Endpoint,
  type EndpointPortScope,
  type IPSet,
  type PortMapping,
  Protocol,
  Service,
} from "./gen/api/localv1/api.ts";
import { ipSetAll, toIPSet } from "./ipset.ts";

/** A service as it goes on the wire: its Service value and its Endpoint values by key. */
interface WireService {
  readonly service: Service;
  /** Keyed by endpoint IP. */
  readonly endpoints: ReadonlyMap<string, Endpoint>;
}

const protocolToWire: Record<KubeProtocol, Protocol> = {
  TCP: Protocol.TCP,
  UDP: Protocol.UDP,
  SCTP: Protocol.SCTP,
};

export function encodeLocalService(svc: LocalService): WireService {
  return { service: encodeServiceValue(svc), endpoints: encodeEndpoints(svc) };
}

function encodeServiceValue(svc: LocalService): Service {
  return {
    Namespace: svc.namespace,
    Name: svc.name,
    Type: svc.type,
    Labels: {},
    Annotations: {},
    IPs: {
      ClusterIPs: familySet(svc, (f) => [f.clusterIP]),
      ExternalIPs: familySet(svc, (f) => f.externalIPs),
      LoadBalancerIPs: familySet(svc, (f) => f.loadBalancerIPs),
      Headless: svc.families.length === 0,
    },
    IPFilters: hasSourceRanges(svc)
      ? [
          {
            TargetIPs: familySet(svc, (f) => f.loadBalancerIPs),
            SourceRanges: acrossFamilies(svc, "sourceRanges"),
          },
        ]
      : [],
    MapIP: false,
    Ports: svc.ports.map(encodePort),
    ExternalTrafficToLocal: svc.externalTrafficPolicy === "Local",
    InternalTrafficToLocal: svc.internalTrafficPolicy === "Local",
    SessionAffinity:
      svc.sessionAffinitySeconds > 0
        ? { $case: "ClientIP", value: { TimeoutSeconds: svc.sessionAffinitySeconds } }
        : undefined,
    HealthCheckNodePort: svc.healthCheckNodePort,
    LocalReadyEndpoints: svc.localReadyEndpoints,
    ClusterIPsOrdered: clusterIPsOf(svc),
    ExternalIPsOrdered: acrossFamilies(svc, "externalIPs"),
    LoadBalancerIPsOrdered: acrossFamilies(svc, "loadBalancerIPs"),
  };
}

/** Addresses of the service's families as an IPSet: each family in address order, each address once. */
function familySet(svc: LocalService, pick: (f: LocalServiceFamily) => readonly string[]): IPSet {
  const sorted = (family: IPFamily) => {
    const f = serviceFamily(svc, family);
    return f === undefined ? [] : [...new Set(pick(f))].sort(compareAddresses);
  };
  return { V4: sorted("IPv4"), V6: sorted("IPv6") };
}

function encodePort(port: LocalServicePort): PortMapping {
  return {
    Name: port.name,
    Protocol: protocolToWire[port.protocol],
    Port: port.port,
    NodePort: port.nodePort,
    // kpng clients resolve an unnamed port through TargetPort; give it when it is unambiguous.
    TargetPort: port.name === "" ? (singleTargetPort(port) ?? 0) : 0,
    TargetPortName: "",
    HasEndpoints: port.hasEndpoints,
    HasIPv4Endpoints: port.endpointFamilies.includes("IPv4"),
    HasIPv6Endpoints: port.endpointFamilies.includes("IPv6"),
  };
}

function singleTargetPort(port: LocalServicePort): number | undefined {
  const ports = new Set<number>();
  for (const ep of port.internalEndpoints) ports.add(ep.port);
  for (const ep of port.externalEndpoints) ports.add(ep.port);
  return ports.size === 1 ? ports.values().next().value : undefined;
}

function encodeEndpoints(svc: LocalService): Map<string, Endpoint> {
  const byIP = new Map<string, Endpoint>();
  const scopeOf = (ep: LocalEndpoint, portName: string): EndpointPortScope => {
    let wire = byIP.get(ep.ip);
    if (wire === undefined) {
      wire = {
        Hostname: "",
        IPs: toIPSet([ep.ip]),
        Local: ep.local,
        PortOverrides: [],
        Scopes: { Internal: false, External: false },
        Conditions: { Ready: ep.ready, Serving: ep.serving, Terminating: ep.terminating },
        PortScopes: [],
      };
      byIP.set(ep.ip, wire);
    }
    let scope = wire.PortScopes.find((s) => s.Name === portName && s.Port === ep.port);
    if (scope === undefined) {
      scope = { Name: portName, Port: ep.port, Internal: false, External: false };
      wire.PortScopes.push(scope);
      wire.PortOverrides.push({ Name: portName, Port: ep.port });
    }
    return scope;
  };
  for (const port of svc.ports) {
    for (const ep of port.internalEndpoints) scopeOf(ep, port.name).Internal = true;
    for (const ep of port.externalEndpoints) scopeOf(ep, port.name).External = true;
  }
  for (const wire of byIP.values()) {
    wire.Scopes = {
      Internal: wire.PortScopes.some((s) => s.Internal),
      External: wire.PortScopes.some((s) => s.External),
    };
  }
  return byIP;
}

/**
 * A string that two Endpoint values share exactly when they encode to the same bytes: every
 * field, in order. Nodes see most endpoints alike (only `Local` differs on the node that runs
 * one), so the encoding is looked up by this instead of being done again for each node.
 */
export function endpointFingerprint(ep: Endpoint): string {
  const flag = (b: boolean | undefined) => (b === undefined ? "-" : b ? "1" : "0");
  let out = `${ep.Hostname}\0${ep.IPs === undefined ? "-" : `${ep.IPs.V4.join(",")}\0${ep.IPs.V6.join(",")}`}\0`;
  out += `${flag(ep.Local)}${flag(ep.Scopes?.Internal)}${flag(ep.Scopes?.External)}`;
  out += `${ep.Conditions === undefined ? "-" : `${flag(ep.Conditions.Ready)}${flag(ep.Conditions.Serving)}${flag(ep.Conditions.Terminating)}`}`;
  for (const o of ep.PortOverrides) out += `\0o${o.Name}\0${o.Port}`;
  for (const s of ep.PortScopes) out += `\0s${s.Name}\0${s.Port}\0${flag(s.Internal)}${flag(s.External)}`;
  return out;
}

/**
 * One writer for every value: a fresh one allocates and grows a buffer for each message, which
 * cost more than the encoding at ~1M values. Encoding is synchronous, so it is never shared
 * between two messages at once; finish() copies the bytes out and keeps the buffer.
 */
const writer = new BinaryWriter();

export function encodeServiceBytes(service: Service): Uint8Array {
  return Service.encode(service, writer).finish();
}

export function encodeEndpointBytes(endpoint: Endpoint): Uint8Array {
  return Endpoint.encode(endpoint, writer).finish();
}

const protocolFromWire = new Map<number, KubeProtocol>([
  [Protocol.TCP, "TCP"],
  [Protocol.UDP, "UDP"],
  [Protocol.SCTP, "SCTP"],
]);

const serviceTypes = new Set<string>(["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]);

/** Rebuilds a LocalService from its wire values; throws with a reason on a value we cannot read. */
export function decodeLocalService(service: Service, endpoints: Iterable<Endpoint>): LocalService {
  if (!serviceTypes.has(service.Type)) throw new Error(`unknown service type "${service.Type}"`);
  const eps = [...endpoints];
  const ports = service.Ports.map((port) => decodePort(port, eps));
  return {
    namespace: service.Namespace,
    name: service.Name,
    type: service.Type as ServiceType,
    families: decodeFamilies(service),
    sessionAffinitySeconds:
      service.SessionAffinity?.$case === "ClientIP" ? service.SessionAffinity.value.TimeoutSeconds : 0,
    internalTrafficPolicy: service.InternalTrafficToLocal ? "Local" : "Cluster",
    externalTrafficPolicy: service.ExternalTrafficToLocal ? "Local" : "Cluster",
    healthCheckNodePort: service.HealthCheckNodePort,
    localReadyEndpoints: service.LocalReadyEndpoints,
    ports,
  };
}

/**
 * The wire's addresses split by family, canonical: one family per cluster IP, primary first (the
 * ordered lists carry the order; an older server sends only the sets, IPv4 first).
 */
function decodeFamilies(service: Service): LocalServiceFamily[] {
  const ordered = (list: readonly string[], set: IPSet | undefined) =>
    list.length > 0 ? list : ipSetAll(set);
  const addressesOf = (list: readonly string[], family: IPFamily) =>
    list.filter((ip) => familyOf(ip) === family).map(canonicalIP);
  const externalIPs = ordered(service.ExternalIPsOrdered, service.IPs?.ExternalIPs);
  const loadBalancerIPs = ordered(service.LoadBalancerIPsOrdered, service.IPs?.LoadBalancerIPs);
  const sourceRanges = service.IPFilters.flatMap((f) => f.SourceRanges);
  const families: LocalServiceFamily[] = [];
  for (const ip of ordered(service.ClusterIPsOrdered, service.IPs?.ClusterIPs)) {
    const family = familyOf(ip);
    if (family === undefined) throw new Error(`cluster IP "${ip}" is not an IP address`);
    if (families.some((f) => f.family === family)) continue;
    families.push({
      family,
      clusterIP: canonicalIP(ip),
      externalIPs: addressesOf(externalIPs, family),
      loadBalancerIPs: addressesOf(loadBalancerIPs, family),
      sourceRanges: sourceRanges.filter((cidr) => familyOf(cidr) === family),
    });
  }
  return families;
}

function decodePort(port: PortMapping, endpoints: readonly Endpoint[]): LocalServicePort {
  const protocol = protocolFromWire.get(port.Protocol);
  if (protocol === undefined) throw new Error(`port "${port.Name}": unknown protocol ${port.Protocol}`);
  const internal: LocalEndpoint[] = [];
  const external: LocalEndpoint[] = [];
  for (const ep of endpoints) {
    const raw = ep.IPs?.V4[0] ?? ep.IPs?.V6[0];
    if (raw === undefined) continue;
    const ip = canonicalIP(raw);
    for (const scope of ep.PortScopes) {
      if (scope.Name !== port.Name) continue;
      const local: LocalEndpoint = {
        ip,
        port: scope.Port,
        local: ep.Local,
        ready: ep.Conditions?.Ready ?? true,
        serving: ep.Conditions?.Serving ?? true,
        terminating: ep.Conditions?.Terminating ?? false,
      };
      if (scope.Internal) internal.push(local);
      if (scope.External) external.push(local);
    }
  }
  const families: IPFamily[] = [];
  if (port.HasIPv4Endpoints) families.push("IPv4");
  if (port.HasIPv6Endpoints) families.push("IPv6");
  return withFamilyEndpoints({
    name: port.Name,
    protocol,
    port: port.Port,
    nodePort: port.NodePort,
    hasEndpoints: port.HasEndpoints,
    endpointFamilies: families,
    internalEndpoints: internal.sort(compareEndpoints),
    externalEndpoints: external.sort(compareEndpoints),
  });
}
