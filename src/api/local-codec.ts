// LocalService ↔ localv1 wire values. A service travels as one Service value plus one Endpoint
// value per endpoint IP (key "namespace/service/<ip>"): the IP is unique per endpoint and
// family, unlike kpng's pod name, so a dual-stack pod gives two values that never collide.

import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { sameServiceFields } from "../brain/local-equal.ts";
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
import { PackedEndpoint } from "../model/packed-endpoint.ts";
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

export function encodeServiceValue(svc: LocalService): Service {
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
    TargetPort: port.name === "" ? singleTargetPort(port) : 0,
    TargetPortName: "",
    HasEndpoints: port.hasEndpoints,
    HasIPv4Endpoints: port.endpointFamilies.includes("IPv4"),
    HasIPv6Endpoints: port.endpointFamilies.includes("IPv6"),
  };
}

/** The one target port of every endpoint of the port; 0 when there are several or none. */
function singleTargetPort(port: LocalServicePort): number {
  let target = -1;
  for (const list of [port.internalEndpoints, port.externalEndpoints]) {
    for (const ep of list) {
      if (target === -1) target = ep.port;
      else if (ep.port !== target) return 0;
    }
  }
  return target === -1 ? 0 : target;
}

/** Whether the two services' Service values (not their endpoints) encode to the same bytes. */
export function sameServiceValue(a: LocalService, b: LocalService): boolean {
  if (!sameServiceFields(a, b)) return false;
  for (let i = 0; i < a.ports.length; i++) {
    const port = a.ports[i]!;
    if (port.name === "" && singleTargetPort(port) !== singleTargetPort(b.ports[i]!)) return false;
  }
  return true;
}

/** What one endpoint IP's Endpoint value is made of: its first LocalEndpoint, its port scopes. */
export interface GatheredEndpoint {
  readonly first: LocalEndpoint;
  /** In the order the ports and their internal, then external, lists name them. */
  readonly scopes: EndpointPortScope[];
}

/** The service's endpoints by IP, in the order the ports name them; with `only`, that IP's alone. */
export function gatherEndpoints(svc: LocalService, only?: string): Map<string, GatheredEndpoint> {
  const byIP = new Map<string, GatheredEndpoint>();
  const scopeOf = (ep: LocalEndpoint, portName: string): EndpointPortScope | undefined => {
    if (only !== undefined && ep.ip !== only) return undefined;
    let gathered = byIP.get(ep.ip);
    if (gathered === undefined) {
      gathered = { first: ep, scopes: [] };
      byIP.set(ep.ip, gathered);
    }
    let scope = gathered.scopes.find((s) => s.Name === portName && s.Port === ep.port);
    if (scope === undefined) {
      scope = { Name: portName, Port: ep.port, Internal: false, External: false };
      gathered.scopes.push(scope);
    }
    return scope;
  };
  for (const port of svc.ports) {
    for (const ep of port.internalEndpoints) {
      const scope = scopeOf(ep, port.name);
      if (scope !== undefined) scope.Internal = true;
    }
    for (const ep of port.externalEndpoints) {
      const scope = scopeOf(ep, port.name);
      if (scope !== undefined) scope.External = true;
    }
  }
  return byIP;
}

/**
 * A string that two gathered endpoints of one IP share exactly when their Endpoint values encode
 * to the same bytes: every input of endpointValueOf but the IP. Nodes see most endpoints alike
 * (only `Local` differs on the node that runs one), so the encoding is looked up by this instead
 * of being done again for each node.
 */
export function endpointDescriptor({ first, scopes }: GatheredEndpoint): string {
  let out = `${first.local ? 1 : 0}${first.ready ? 1 : 0}${first.serving ? 1 : 0}${first.terminating ? 1 : 0}`;
  for (const s of scopes) out += `\0${s.Name}\0${s.Port}\0${s.Internal ? 1 : 0}${s.External ? 1 : 0}`;
  return out;
}

/** The Endpoint value of one IP. */
export function endpointValueOf(ip: string, { first, scopes }: GatheredEndpoint): Endpoint {
  let internal = false;
  let external = false;
  for (const s of scopes) {
    internal ||= s.Internal;
    external ||= s.External;
  }
  return {
    Hostname: "",
    IPs: toIPSet([ip]),
    Local: first.local,
    PortOverrides: scopes.map((s) => ({ Name: s.Name, Port: s.Port })),
    Scopes: { Internal: internal, External: external },
    Conditions: { Ready: first.ready, Serving: first.serving, Terminating: first.terminating },
    PortScopes: scopes.map((s) => ({ ...s })),
  };
}

function encodeEndpoints(svc: LocalService): Map<string, Endpoint> {
  const byIP = new Map<string, Endpoint>();
  for (const [ip, gathered] of gatherEndpoints(svc)) byIP.set(ip, endpointValueOf(ip, gathered));
  return byIP;
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
      if (!Number.isInteger(scope.Port) || scope.Port < 0 || scope.Port > 65535)
        throw new Error(`port "${port.Name}": endpoint port ${scope.Port} is out of range`);
      const local = new PackedEndpoint(ip, scope.Port, {
        local: ep.Local,
        ready: ep.Conditions?.Ready ?? true,
        serving: ep.Conditions?.Serving ?? true,
        terminating: ep.Conditions?.Terminating ?? false,
        nodeUnknown: false,
      });
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
