// metadata and kind/apiVersion checks shared by every kind we read.

import {
  InvalidField,
  optionalObject,
  optionalString,
  type RawObject,
  requiredString,
  stringMap,
} from "./field-reader.ts";
import type { ObjectMeta } from "./kube.ts";

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A DNS subdomain (RFC 1123) of at most 253 characters, as Node names and label prefixes are. */
export function isDnsSubdomain(name: string): boolean {
  return name.length > 0 && name.length <= 253 && DNS_SUBDOMAIN.test(name);
}

/** A DNS-1123 label or subdomain, as names and namespaces are; kept loose on length. */
const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

function checkName(value: string, path: string): string {
  if (value.length > 253 || !NAME.test(value)) {
    throw new InvalidField(
      `${path}: ${JSON.stringify(value)} is not a valid name (lowercase letters, digits, '-' and '.')`,
    );
  }
  return value;
}

/** namespace: "" for cluster-scoped kinds, else the object's namespace or the default. */
export function readMetadata(raw: RawObject, namespaced: boolean, defaultNamespace: string): ObjectMeta {
  const meta = optionalObject(raw.metadata, "metadata");
  const name = checkName(requiredString(meta.name, "metadata.name"), "metadata.name");
  const namespace = namespaced
    ? checkName(
        optionalString(meta.namespace, "metadata.namespace", "") || defaultNamespace,
        "metadata.namespace",
      )
    : "";
  return {
    namespace,
    name,
    uid: optionalString(meta.uid, "metadata.uid"),
    resourceVersion: optionalString(meta.resourceVersion, "metadata.resourceVersion"),
    labels: stringMap(meta.labels, "metadata.labels"),
    annotations: stringMap(meta.annotations, "metadata.annotations"),
  };
}

/**
 * Items of a list response carry no kind or apiVersion, so both may be absent; when present they
 * must be the ones this parser reads.
 */
export function checkKind(raw: RawObject, kind: string, apiVersions: readonly string[]): void {
  if (raw.kind !== undefined && raw.kind !== kind) {
    throw new InvalidField(`kind: expected ${kind}, got ${JSON.stringify(raw.kind)}`);
  }
  if (raw.apiVersion !== undefined && !apiVersions.includes(raw.apiVersion as string)) {
    throw new InvalidField(
      `apiVersion: ${JSON.stringify(raw.apiVersion)} is not supported for ${kind} (use ${apiVersions.join(" or ")})`,
    );
  }
}

/** "namespace/name" (or the name) from a raw object that may be invalid, for error reports. */
export function bestEffortName(raw: unknown, namespaced: boolean, defaultNamespace: string): string {
  if (typeof raw !== "object" || raw === null) return "<unknown>";
  const meta = (raw as RawObject).metadata;
  if (typeof meta !== "object" || meta === null) return "<unknown>";
  const { name, namespace } = meta as RawObject;
  const n = typeof name === "string" && name !== "" ? name : "<unnamed>";
  if (!namespaced) return n;
  const ns = typeof namespace === "string" && namespace !== "" ? namespace : defaultNamespace;
  return `${ns}/${n}`;
}
