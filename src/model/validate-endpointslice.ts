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
import {
  type AddressType,
  type EndpointPort,
  type EndpointSlice,
  LABEL_SERVICE_NAME,
  type SliceEndpoint,
} from "./kube.ts";
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

function hintNames(raw: unknown, path: string): string[] {
  return optionalArray(raw, path).map((h, i) =>
    requiredString(object(h, `${path}[${i}]`).name, `${path}[${i}].name`),
  );
}

function readEndpoint(raw: unknown, path: string, addressType: AddressType): SliceEndpoint {
  const ep = object(raw, path);
  const conditions = optionalObject(ep.conditions, `${path}.conditions`);
  const hints = optionalObject(ep.hints, `${path}.hints`);
  const targetRef = optionalObject(ep.targetRef, `${path}.targetRef`);
  const refKind = optionalString(targetRef.kind, `${path}.targetRef.kind`);
  const refName = optionalString(targetRef.name, `${path}.targetRef.name`);
  return {
    addresses: optionalArray(ep.addresses, `${path}.addresses`).map((a, i) =>
      readAddress(a, `${path}.addresses[${i}]`, addressType),
    ),
    conditions: {
      ready: optionalBoolean(conditions.ready, `${path}.conditions.ready`),
      serving: optionalBoolean(conditions.serving, `${path}.conditions.serving`),
      terminating: optionalBoolean(conditions.terminating, `${path}.conditions.terminating`),
    },
    hostname: optionalString(ep.hostname, `${path}.hostname`),
    nodeName: optionalString(ep.nodeName, `${path}.nodeName`),
    zone: optionalString(ep.zone, `${path}.zone`),
    zoneHints: hintNames(hints.forZones, `${path}.hints.forZones`),
    nodeHints: hintNames(hints.forNodes, `${path}.hints.forNodes`),
    podName: refKind === "Pod" ? refName : "",
  };
}

export function readEndpointSlice(raw: RawObject, defaultNamespace: string): EndpointSlice {
  checkKind(raw, "EndpointSlice", ["discovery.k8s.io/v1"]);
  const metadata = readMetadata(raw, true, defaultNamespace);
  const addressType = oneOf(raw.addressType, "addressType", ["IPv4", "IPv6", "FQDN"]);
  return {
    kind: "EndpointSlice",
    metadata,
    addressType,
    serviceName: metadata.labels[LABEL_SERVICE_NAME] ?? "",
    ports: optionalArray(raw.ports, "ports").map((p, i) => readPort(p, `ports[${i}]`)),
    endpoints: optionalArray(raw.endpoints, "endpoints").map((e, i) =>
      readEndpoint(e, `endpoints[${i}]`, addressType),
    ),
  };
}
