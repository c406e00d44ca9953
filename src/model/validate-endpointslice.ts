// discovery/v1 EndpointSlice: raw JSON → EndpointSlice. Every address must be of the slice's
// addressType, because the brain picks slices per family by addressType alone.

import {
  InvalidField,
  object,
  oneOf,
  optionalArray,
  optionalBoolean,
  optionalInteger,
  optionalObject,
  optionalString,
  type RawObject,
  requiredString,
} from "./field-reader.ts";
import { canonicalAddress, familyOfAddress } from "./ip.ts";
import { ipv4Value } from "./ipv4.ts";
import {
  type AddressType,
  type EndpointConditions,
  type EndpointPort,
  type EndpointSlice,
  LABEL_SERVICE_NAME,
  type SliceEndpoint,
} from "./kube.ts";
import { inStrictAddressOrder } from "./order.ts";
import { keyPart, SharedLists, SharedStrings } from "./shared-values.ts";
import { endpointHints, OneAddressEndpoint } from "./slice-endpoint.ts";
import { checkKind, readMetadata } from "./validate-meta.ts";

const FQDN = /^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?\.?$/;

function readAddress(value: unknown, path: string, addressType: AddressType): string {
  const text = requiredString(value, path);
  if (addressType === "FQDN") {
    if (text.length > 253 || !FQDN.test(text))
      throw new InvalidField(`${path}: ${JSON.stringify(text)} is not a valid FQDN`);
    return text;
  }
  const family = familyOfAddress(text);
  if (family === undefined)
    throw new InvalidField(`${path}: ${JSON.stringify(text)} is not a valid IP address`);
  if (family !== addressType) {
    throw new InvalidField(
      `${path}: ${text} is an ${family} address in a slice of addressType ${addressType}`,
    );
  }
  return canonicalAddress(text) ?? text;
}

function readPort(raw: unknown, path: string): EndpointPort {
  const p = object(raw, path);
  return {
    name: p.name === undefined || p.name === null ? null : optionalString(p.name, `${path}.name`),
    protocol: oneOf(p.protocol, `${path}.protocol`, ["TCP", "UDP", "SCTP"], "TCP"),
    // 0 is let through as "unset": the brain skips such ports rather than losing the whole slice.
    port:
      p.port === undefined || p.port === null ? null : optionalInteger(p.port, `${path}.port`, 0, 65535, 0),
  };
}

/**
 * Node and zone names, one copy each for every endpoint that names them: a cluster has thousands
 * of nodes at most, and a table of this many stays small.
 */
const placeNames = new SharedStrings(65_536);

/** A slice's port list, shared by the slices that have the same (see shared-values.ts). */
const sharedPorts = new SharedLists<EndpointPort>(
  4096,
  (a, b) => a.name === b.name && a.protocol === b.protocol && a.port === b.port,
);

function portsKey(ports: readonly EndpointPort[]): string {
  let key = "";
  for (const p of ports) key += `${keyPart(p.name)}/${p.protocol}/${p.port ?? "-"};`;
  return key;
}

function readPorts(raw: unknown): readonly EndpointPort[] {
  const ports = optionalArray(raw, "ports").map((p, i) => readPort(p, `ports[${i}]`));
  return sharedPorts.shared(ports, portsKey);
}

function hintNames(raw: unknown, path: string): string[] {
  return optionalArray(raw, path).map((h, i) =>
    requiredString(object(h, `${path}[${i}]`).name, `${path}[${i}].name`),
  );
}

const isAbsent = (v: unknown): v is undefined | null => v === undefined || v === null;
const isRecord = (v: unknown): v is RawObject => typeof v === "object" && v !== null && !Array.isArray(v);
const isBooleanOrAbsent = (v: unknown) => isAbsent(v) || typeof v === "boolean";
const isStringOrAbsent = (v: unknown) => isAbsent(v) || typeof v === "string";
const NO_NAMES: readonly string[] = Object.freeze([]);

/** The 27 possible conditions (each true, false or unset), shared by every endpoint that has them. */
const CONDITIONS: readonly EndpointConditions[] = (() => {
  const values = [true, false, null];
  const out: EndpointConditions[] = [];
  for (const ready of values)
    for (const serving of values)
      for (const terminating of values) out.push(Object.freeze({ ready, serving, terminating }));
  return out;
})();

const conditionIndex = (v: unknown): number => (v === true ? 0 : v === false ? 1 : 2);

/** Hint names when every hint is an object with a name; undefined otherwise (the reader says why). */
function plainHintNames(raw: unknown): readonly string[] | undefined {
  if (isAbsent(raw)) return NO_NAMES;
  if (!Array.isArray(raw)) return undefined;
  const out: string[] = [];
  for (const h of raw) {
    if (!isRecord(h) || typeof h.name !== "string" || h.name === "") return undefined;
    out.push(h.name);
  }
  return out;
}

/**
 * The value (ipv4Value) of the first address of the endpoint plainEndpoint last accepted, -1 when
 * it had none: the slice reader finds the addresses' order from it without reading them again.
 */
let plainFirstAddress = -1;

/**
 * An endpoint as the API writes it (IPv4 addresses, fields of the expected types) read without
 * building a field path per field: a million endpoints at 100k Services. Anything else, valid or
 * not, is left to readEndpoint, which gives the same result or names what is wrong.
 */
export function plainEndpoint(raw: unknown, addressType: AddressType): SliceEndpoint | undefined {
  if (!isRecord(raw) || addressType !== "IPv4") return undefined;
  const { addresses, conditions = null, hints = null, targetRef = null } = raw;
  if (!Array.isArray(addresses)) return undefined;
  let first = -1;
  for (let i = 0; i < addresses.length; i++) {
    const a: unknown = addresses[i];
    const value = typeof a === "string" ? ipv4Value(a) : -1;
    if (value < 0) return undefined;
    if (i === 0) first = value;
  }
  if (conditions !== null && !isRecord(conditions)) return undefined;
  const c = conditions ?? {};
  if (!isBooleanOrAbsent(c.ready) || !isBooleanOrAbsent(c.serving) || !isBooleanOrAbsent(c.terminating))
    return undefined;
  if (hints !== null && !isRecord(hints)) return undefined;
  const zoneHints = plainHintNames(hints?.forZones);
  const nodeHints = plainHintNames(hints?.forNodes);
  if (zoneHints === undefined || nodeHints === undefined) return undefined;
  if (targetRef !== null && !isRecord(targetRef)) return undefined;
  const refKind = targetRef?.kind;
  const refName = targetRef?.name;
  const { hostname, nodeName, zone } = raw;
  if (!isStringOrAbsent(refKind) || !isStringOrAbsent(refName)) return undefined;
  if (!isStringOrAbsent(hostname) || !isStringOrAbsent(nodeName) || !isStringOrAbsent(zone)) return undefined;
  plainFirstAddress = first;
  return endpointOf(
    addresses as string[],
    CONDITIONS[
      conditionIndex(c.ready) * 9 + conditionIndex(c.serving) * 3 + conditionIndex(c.terminating)
    ] as EndpointConditions,
    (hostname as string | undefined) ?? "",
    placeNames.shared((nodeName as string | undefined) ?? ""),
    placeNames.shared((zone as string | undefined) ?? ""),
    zoneHints,
    nodeHints,
    refKind === "Pod" ? ((refName as string | undefined) ?? "") : "",
  );
}

/** An endpoint of one address as a OneAddressEndpoint (see slice-endpoint.ts), any other as fields. */
function endpointOf(
  addresses: readonly string[],
  conditions: EndpointConditions,
  hostname: string,
  nodeName: string,
  zone: string,
  zoneHints: readonly string[],
  nodeHints: readonly string[],
  podName: string,
): SliceEndpoint {
  if (addresses.length === 1) {
    const hints = endpointHints(zoneHints, nodeHints);
    return new OneAddressEndpoint(
      addresses[0] as string,
      conditions,
      hostname,
      nodeName,
      zone,
      hints,
      podName,
    );
  }
  return { addresses, conditions, hostname, nodeName, zone, zoneHints, nodeHints, podName };
}

export function readEndpoint(raw: unknown, path: string, addressType: AddressType): SliceEndpoint {
  const ep = object(raw, path);
  const conditions = optionalObject(ep.conditions, `${path}.conditions`);
  const hints = optionalObject(ep.hints, `${path}.hints`);
  const targetRef = optionalObject(ep.targetRef, `${path}.targetRef`);
  const refKind = optionalString(targetRef.kind, `${path}.targetRef.kind`);
  const refName = optionalString(targetRef.name, `${path}.targetRef.name`);
  return endpointOf(
    optionalArray(ep.addresses, `${path}.addresses`).map((a, i) =>
      readAddress(a, `${path}.addresses[${i}]`, addressType),
    ),
    {
      ready: optionalBoolean(conditions.ready, `${path}.conditions.ready`),
      serving: optionalBoolean(conditions.serving, `${path}.conditions.serving`),
      terminating: optionalBoolean(conditions.terminating, `${path}.conditions.terminating`),
    },
    optionalString(ep.hostname, `${path}.hostname`),
    placeNames.shared(optionalString(ep.nodeName, `${path}.nodeName`)),
    placeNames.shared(optionalString(ep.zone, `${path}.zone`)),
    hintNames(hints.forZones, `${path}.hints.forZones`),
    hintNames(hints.forNodes, `${path}.hints.forNodes`),
    refKind === "Pod" ? refName : "",
  );
}

export function readEndpointSlice(raw: RawObject, defaultNamespace: string): EndpointSlice {
  checkKind(raw, "EndpointSlice", ["discovery.k8s.io/v1"]);
  const metadata = readMetadata(raw, true, defaultNamespace);
  const addressType = oneOf(raw.addressType, "addressType", ["IPv4", "IPv6", "FQDN"]);
  // The addresses' order (see inAddressOrder) from what plainEndpoint read; left to
  // inStrictAddressOrder when an endpoint took the field-by-field reader.
  let inOrder = true as boolean | undefined;
  let before = -1;
  // map, not push: the list is kept for as long as the slice, at its length.
  const endpoints = optionalArray(raw.endpoints, "endpoints").map((e, i) => {
    const plain = plainEndpoint(e, addressType);
    if (plain === undefined) {
      inOrder = undefined;
      return readEndpoint(e, `endpoints[${i}]`, addressType);
    }
    // No address (-1) is never in order, as inStrictAddressOrder has it.
    if (inOrder === true && plainFirstAddress <= before) inOrder = false;
    before = plainFirstAddress;
    return plain;
  });
  return {
    kind: "EndpointSlice",
    metadata,
    addressType,
    serviceName: metadata.labels[LABEL_SERVICE_NAME] ?? "",
    ports: readPorts(raw.ports),
    endpoints,
    // Found while the addresses were read: the brain then never reads them to merge the ports.
    inAddressOrder: inOrder ?? inStrictAddressOrder(endpoints),
  };
}
