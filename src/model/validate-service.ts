// core/v1 Service: raw JSON → Service, applying the API defaults a proxy relies on.

import {
  InvalidField,
  integer,
  object,
  oneOf,
  optionalArray,
  optionalInteger,
  optionalObject,
  optionalString,
  type RawObject,
  requiredString,
} from "./field-reader.ts";
import { canonicalAddress, familyOfAddress, parseCidr } from "./ip.ts";
import type { IPFamily, LoadBalancerIngress, Service, ServicePort } from "./kube.ts";
import { keyPart, listOrEmpty, SharedLists } from "./shared-values.ts";
import { checkKind, readMetadata } from "./validate-meta.ts";

const PROTOCOLS = ["TCP", "UDP", "SCTP"] as const;
const FAMILIES = ["IPv4", "IPv6"] as const;
const DEFAULT_AFFINITY_SECONDS = 10800;
const MAX_AFFINITY_SECONDS = 86400;

function ipAddress(value: unknown, path: string): string {
  const text = requiredString(value, path);
  const canonical = canonicalAddress(text);
  if (canonical === undefined)
    throw new InvalidField(`${path}: ${JSON.stringify(text)} is not a valid IP address`);
  return canonical;
}

/** "" and "None" mean headless; anything else must be an IP. */
function clusterIPValue(value: unknown, path: string): string {
  const text = optionalString(value, path);
  return text === "" || text === "None" ? text : ipAddress(text, path);
}

function readPort(raw: unknown, path: string): ServicePort {
  const p = object(raw, path);
  const targetPort = p.targetPort;
  let target: number | string;
  if (targetPort === undefined || targetPort === null) target = "";
  else if (typeof targetPort === "number") target = integer(targetPort, `${path}.targetPort`, 1, 65535);
  else if (typeof targetPort === "string") target = targetPort;
  else
    throw new InvalidField(`${path}.targetPort: expected a number or a port name, got ${typeof targetPort}`);
  return {
    name: optionalString(p.name, `${path}.name`),
    protocol: oneOf(p.protocol, `${path}.protocol`, PROTOCOLS, "TCP"),
    port: integer(p.port, `${path}.port`, 1, 65535),
    nodePort: optionalInteger(p.nodePort, `${path}.nodePort`, 0, 65535, 0),
    targetPort: target,
  };
}

/** Port lists without node ports, shared by the Services that have the same (see shared-values.ts). */
const sharedPorts = new SharedLists<ServicePort>(
  4096,
  (a, b) =>
    a.name === b.name &&
    a.protocol === b.protocol &&
    a.port === b.port &&
    a.nodePort === b.nodePort &&
    a.targetPort === b.targetPort,
);
const sharedFamilies = new SharedLists<IPFamily>(8, (a, b) => a === b);

function portsKey(ports: readonly ServicePort[]): string {
  let key = "";
  for (const p of ports) {
    const target = typeof p.targetPort === "number" ? `#${p.targetPort}` : keyPart(p.targetPort);
    key += `${keyPart(p.name)}/${p.protocol}/${p.port}/${target};`;
  }
  return key;
}

function readPorts(raw: unknown): readonly ServicePort[] {
  const ports = optionalArray(raw, "spec.ports").map((p, i) => readPort(p, `spec.ports[${i}]`));
  const seen = new Set<string>();
  ports.forEach((p, i) => {
    if (seen.has(p.name)) {
      throw new InvalidField(
        `spec.ports[${i}].name: ${JSON.stringify(p.name)} is used by more than one port`,
      );
    }
    seen.add(p.name);
  });
  if (ports.some((p) => p.nodePort !== 0)) return ports;
  return sharedPorts.shared(ports, portsKey);
}

function readIngress(raw: unknown, path: string): LoadBalancerIngress {
  const ing = object(raw, path);
  const text = optionalString(ing.ip, `${path}.ip`);
  const ip = text === "" ? "" : ipAddress(text, `${path}.ip`);
  const ipMode =
    ing.ipMode === undefined || ing.ipMode === null
      ? undefined
      : oneOf(ing.ipMode, `${path}.ipMode`, ["VIP", "Proxy"]);
  return { ip, hostname: optionalString(ing.hostname, `${path}.hostname`), ipMode };
}

function readSourceRanges(raw: unknown): readonly string[] {
  const ranges = optionalArray(raw, "spec.loadBalancerSourceRanges").map((value, i) => {
    const path = `spec.loadBalancerSourceRanges[${i}]`;
    if (typeof value !== "string")
      throw new InvalidField(`${path}: expected a CIDR string, got ${typeof value}`);
    if (parseCidr(value.trim()) === undefined)
      throw new InvalidField(`${path}: ${JSON.stringify(value)} is not a CIDR`);
    return value;
  });
  return listOrEmpty(ranges);
}

function readFamilies(
  spec: RawObject,
  clusterIP: string,
): { clusterIPs: readonly string[]; ipFamilies: readonly IPFamily[] } {
  const clusterIPs = optionalArray(spec.clusterIPs, "spec.clusterIPs").map((v, i) =>
    clusterIPValue(v, `spec.clusterIPs[${i}]`),
  );
  const ipFamilies = optionalArray(spec.ipFamilies, "spec.ipFamilies").map((v, i) =>
    oneOf(v, `spec.ipFamilies[${i}]`, FAMILIES),
  );
  if (clusterIPs.length > 2) throw new InvalidField("spec.clusterIPs: at most 2 entries (one per family)");
  if (ipFamilies.length > 2) throw new InvalidField("spec.ipFamilies: at most 2 entries");
  if (ipFamilies.length === 2 && ipFamilies[0] === ipFamilies[1]) {
    throw new InvalidField(`spec.ipFamilies: ${ipFamilies[0]} is listed twice`);
  }
  const ipFamiliesOf = clusterIPs.map((ip) => familyOfAddress(ip));
  if (clusterIPs.length === 2) {
    if (ipFamiliesOf[0] === undefined || ipFamiliesOf[0] === ipFamiliesOf[1]) {
      throw new InvalidField("spec.clusterIPs: two entries must be one IPv4 and one IPv6 address");
    }
  }
  if (clusterIP !== "" && clusterIPs.length > 0 && clusterIPs[0] !== clusterIP) {
    throw new InvalidField(
      `spec.clusterIPs[0]: ${JSON.stringify(clusterIPs[0])} differs from spec.clusterIP ${JSON.stringify(clusterIP)}`,
    );
  }
  ipFamiliesOf.forEach((family, i) => {
    const declared = ipFamilies[i];
    if (family !== undefined && declared !== undefined && family !== declared) {
      throw new InvalidField(
        `spec.clusterIPs[${i}]: ${clusterIPs[i]} is not ${declared} as spec.ipFamilies[${i}] says`,
      );
    }
    if (family !== undefined && declared === undefined && ipFamilies.length > 0) {
      throw new InvalidField(`spec.ipFamilies: no family for spec.clusterIPs[${i}] ${clusterIPs[i]}`);
    }
  });
  return {
    clusterIPs: listOrEmpty(clusterIPs),
    ipFamilies: sharedFamilies.shared(ipFamilies, (families) => families.join()),
  };
}

export function readService(raw: RawObject, defaultNamespace: string): Service {
  checkKind(raw, "Service", ["v1"]);
  const metadata = readMetadata(raw, true, defaultNamespace);
  const spec = optionalObject(raw.spec, "spec");
  const status = optionalObject(raw.status, "status");
  const clusterIP = clusterIPValue(spec.clusterIP, "spec.clusterIP");
  const sessionAffinity = oneOf(spec.sessionAffinity, "spec.sessionAffinity", ["None", "ClientIP"], "None");
  const affinityConfig = optionalObject(
    optionalObject(spec.sessionAffinityConfig, "spec.sessionAffinityConfig").clientIP,
    "spec.sessionAffinityConfig.clientIP",
  );
  const timeout = optionalInteger(
    affinityConfig.timeoutSeconds,
    "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
    1,
    MAX_AFFINITY_SECONDS,
    DEFAULT_AFFINITY_SECONDS,
  );
  return {
    kind: "Service",
    metadata,
    type: oneOf(
      spec.type,
      "spec.type",
      ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"],
      "ClusterIP",
    ),
    clusterIP,
    ...readFamilies(spec, clusterIP),
    externalIPs: listOrEmpty(
      optionalArray(spec.externalIPs, "spec.externalIPs").map((v, i) =>
        ipAddress(v, `spec.externalIPs[${i}]`),
      ),
    ),
    loadBalancerSourceRanges: readSourceRanges(spec.loadBalancerSourceRanges),
    loadBalancerIngress: listOrEmpty(
      optionalArray(
        optionalObject(status.loadBalancer, "status.loadBalancer").ingress,
        "status.loadBalancer.ingress",
      ).map((v, i) => readIngress(v, `status.loadBalancer.ingress[${i}]`)),
    ),
    sessionAffinity,
    sessionAffinityTimeoutSeconds: sessionAffinity === "ClientIP" ? timeout : 0,
    ...(spec.publishNotReadyAddresses === true && { publishNotReadyAddresses: true }),
    externalTrafficPolicy: oneOf(
      spec.externalTrafficPolicy,
      "spec.externalTrafficPolicy",
      ["Cluster", "Local"],
      "Cluster",
    ),
    internalTrafficPolicy: oneOf(
      spec.internalTrafficPolicy,
      "spec.internalTrafficPolicy",
      ["Cluster", "Local"],
      "Cluster",
    ),
    healthCheckNodePort: optionalInteger(spec.healthCheckNodePort, "spec.healthCheckNodePort", 0, 65535, 0),
    ports: readPorts(spec.ports),
  };
}
