// Raw Kubernetes JSON (from the API or a YAML file) → the validated model of kube.ts. A bad
// object yields a reason a human can act on; it never throws.

import { InvalidField, object, type RawObject } from "./field-reader.ts";
import type { EndpointSlice, KubeObject, Node, Service, ServiceCIDR } from "./kube.ts";
import { readEndpointSlice } from "./validate-endpointslice.ts";
import { bestEffortName } from "./validate-meta.ts";
import { readNode } from "./validate-node.ts";
import { readService } from "./validate-service.ts";
import { readServiceCIDR } from "./validate-servicecidr.ts";

export type ParseResult<T> =
  | { ok: true; value: T }
  | { ok: false; kind: string; name: string; reason: string }; // name: "ns/name" or best effort

const DEFAULT_NAMESPACE = "default";

function parse<T>(
  kind: string,
  raw: unknown,
  namespaced: boolean,
  defaultNamespace: string,
  read: (raw: RawObject) => T,
): ParseResult<T> {
  try {
    return { ok: true, value: read(object(raw, "object")) };
  } catch (err) {
    if (!(err instanceof InvalidField)) throw err;
    return { ok: false, kind, name: bestEffortName(raw, namespaced, defaultNamespace), reason: err.message };
  }
}

export function parseService(raw: unknown, defaultNamespace = DEFAULT_NAMESPACE): ParseResult<Service> {
  return parse("Service", raw, true, defaultNamespace, (r) => readService(r, defaultNamespace));
}

export function parseEndpointSlice(
  raw: unknown,
  defaultNamespace = DEFAULT_NAMESPACE,
): ParseResult<EndpointSlice> {
  return parse("EndpointSlice", raw, true, defaultNamespace, (r) => readEndpointSlice(r, defaultNamespace));
}

export function parseNode(raw: unknown): ParseResult<Node> {
  return parse("Node", raw, false, "", readNode);
}

export function parseServiceCIDR(raw: unknown): ParseResult<ServiceCIDR> {
  return parse("ServiceCIDR", raw, false, "", readServiceCIDR);
}

/** Dispatches on raw.kind; kinds we do not read give { ok: false, ..., reason: "ignored kind", ignored: true }. */
export function parseKubeObject(
  raw: unknown,
  defaultNamespace = DEFAULT_NAMESPACE,
): ParseResult<KubeObject> & { ignored?: boolean } {
  const kind = typeof raw === "object" && raw !== null ? (raw as RawObject).kind : undefined;
  switch (kind) {
    case "Service":
      return parseService(raw, defaultNamespace);
    case "EndpointSlice":
      return parseEndpointSlice(raw, defaultNamespace);
    case "Node":
      return parseNode(raw);
    case "ServiceCIDR":
      return parseServiceCIDR(raw);
    case undefined:
    case null:
    case "":
      return {
        ok: false,
        kind: "<unknown>",
        name: bestEffortName(raw, true, defaultNamespace),
        reason: typeof raw === "object" && raw !== null ? "kind: is required" : "expected an object",
      };
    default:
      return {
        ok: false,
        kind: String(kind),
        name: bestEffortName(raw, true, defaultNamespace),
        reason: "ignored kind",
        ignored: true,
      };
  }
}
