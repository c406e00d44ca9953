// Turns the text of a Kubernetes YAML or JSON file into validated model objects. Pure: the file
// source does the I/O and the logging, so every rule here is tested on strings.

import { type Document, isMap, isNode, isSeq, LineCounter, parseAllDocuments } from "yaml";
import type { EndpointSlice, KubeObject, Node, Service, ServiceCIDR } from "../../model/kube.ts";
import { objectKey } from "../../model/kube.ts";
import { parseKubeObject } from "../../model/validate.ts";
import type { InvalidObject } from "../../observability/invalid.ts";

/** What a readable file holds, by kind, once each object has been validated. */
export interface ClusterFileContents {
  readonly services: readonly Service[];
  readonly endpointSlices: readonly EndpointSlice[];
  readonly nodes: readonly Node[];
  /** The cluster's Service IP ranges (kind: ServiceCIDR). */
  readonly serviceCIDRs: readonly ServiceCIDR[];
  /** Objects that failed validation; the reason ends with where the object starts in the file. */
  readonly invalid: readonly InvalidObject[];
  /** Objects of kinds a proxy does not read (Pod, Deployment…), as "Kind ns/name". */
  readonly ignored: readonly string[];
  /** Objects defined more than once, as "Kind ns/name": the last definition wins. */
  readonly duplicates: readonly string[];
}

/**
 * The outcome of reading a file. `ok: false` means the file as a whole cannot be used (a YAML
 * syntax error), as opposed to an invalid object, which is skipped and listed in `invalid`.
 */
export type ClusterFileParse =
  | { readonly ok: true; readonly contents: ClusterFileContents }
  | { readonly ok: false; readonly error: string };

const TOO_DEEP =
  "YAML nested too deeply: the parser ran out of stack (Kubernetes objects nest a few dozen levels; this is not one)";

function isStackOverflow(message: string): boolean {
  return /Maximum call stack size exceeded/.test(message);
}

// Guards against "billion laughs" files: a few aliases are normal YAML, thousands are an attack.
const MAX_ALIAS_COUNT = 100;

/**
 * Parses every document of `text`. A document may be one object, a `kind: List` or a typed list
 * such as `ServiceList` (whose items, as the API returns them, carry no `kind`). Objects without a
 * namespace get `defaultNamespace`. `fileName` only labels positions in messages.
 */
export function parseClusterFile(
  text: string,
  fileName: string,
  defaultNamespace = "default",
): ClusterFileParse {
  // kubectl -o json output parses a hundred times faster as JSON than through the YAML parser;
  // text that is not valid JSON goes the YAML way, which also reports syntax errors by position.
  const json = parseJsonObject(text);
  if (json !== undefined) {
    const located = expandList(json, fileName, (i) => `${fileName}: items[${i}]`);
    return { ok: true, contents: validateAll(located, defaultNamespace) };
  }
  const lineCounter = new LineCounter();
  let documents: ReturnType<typeof parseAllDocuments>;
  try {
    documents = parseAllDocuments(text, { lineCounter });
  } catch (err) {
    if (isStackOverflow((err as Error).message)) return { ok: false, error: `${fileName}: ${TOO_DEEP}` };
    throw err;
  }
  const located: LocatedObject[] = [];
  for (const doc of documents) {
    const syntaxError = doc.errors[0];
    if (syntaxError !== undefined) {
      const pos = syntaxError.linePos?.[0];
      const where = pos === undefined ? fileName : `${fileName}:${pos.line}:${pos.col}`;
      // The parser reports running out of stack as an error at the place it gave up.
      if (isStackOverflow(syntaxError.message)) return { ok: false, error: `${where}: ${TOO_DEEP}` };
      // The message's first line, without the position the library appends (we lead with it).
      const firstLine = (syntaxError.message.split("\n")[0] ?? "").replace(/ at line \d+, column \d+:?$/, "");
      return { ok: false, error: `${where}: YAML syntax error: ${firstLine}` };
    }
    let raw: unknown;
    try {
      raw = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
    } catch (err) {
      const message = (err as Error).message;
      return { ok: false, error: `${fileName}: ${isStackOverflow(message) ? TOO_DEEP : message}` };
    }
    located.push(
      ...objectsOfDocument(doc, raw, (offset) => `${fileName}:${lineCounter.linePos(offset).line}`),
    );
  }
  return { ok: true, contents: validateAll(located, defaultNamespace) };
}

interface LocatedObject {
  readonly raw: unknown;
  /** Where the object starts: "file:line", or "file: items[i]" in a JSON list. */
  readonly where: string;
}

/** The objects one document holds: itself, or the items of a list. Empty documents hold none. */
function objectsOfDocument(doc: Document, raw: unknown, where: (offset: number) => string): LocatedObject[] {
  if (raw === null || raw === undefined) return [];
  const docWhere = where(doc.contents?.range?.[0] ?? 0);
  const itemNodes = isMap(doc.contents) ? doc.contents.get("items", true) : undefined;
  return expandList(raw, docWhere, (i) => {
    const node: unknown = isSeq(itemNodes) ? itemNodes.items[i] : undefined;
    const offset = isNode(node) ? node.range?.[0] : undefined;
    return offset === undefined ? docWhere : where(offset);
  });
}

/** A list's items (a typed list such as ServiceList implies its items' kind), or the object itself. */
function expandList(raw: unknown, where: string, itemWhere: (index: number) => string): LocatedObject[] {
  if (!isPlainObject(raw) || !isListKind(raw.kind) || !Array.isArray(raw.items)) return [{ raw, where }];
  const itemKind = raw.kind === "List" ? undefined : (raw.kind as string).slice(0, -"List".length);
  return raw.items.map((item: unknown, i: number) => {
    const withKind = itemKind !== undefined && isPlainObject(item) && item.kind === undefined;
    return { raw: withKind ? { ...item, kind: itemKind } : item, where: itemWhere(i) };
  });
}

/** The value of a text that is one JSON object, else undefined. */
function parseJsonObject(text: string): Record<string, unknown> | undefined {
  if (!text.trimStart().startsWith("{")) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return isPlainObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function validateAll(located: readonly LocatedObject[], defaultNamespace: string): ClusterFileContents {
  const byKey = new Map<string, KubeObject>();
  const invalid: InvalidObject[] = [];
  const ignored: string[] = [];
  const duplicates: string[] = [];
  for (const { raw, where } of located) {
    if (!isPlainObject(raw)) {
      invalid.push({ kind: "", name: where, reason: `not an object (${where})` });
      continue;
    }
    const parsed = parseKubeObject(raw, defaultNamespace);
    if (parsed.ok) {
      const key = `${parsed.value.kind} ${objectKey(parsed.value.metadata)}`;
      if (byKey.has(key)) duplicates.push(key);
      // Delete first so the map keeps the order of the definition that wins.
      byKey.delete(key);
      byKey.set(key, parsed.value);
    } else if (parsed.ignored === true) {
      ignored.push(`${parsed.kind} ${parsed.name}`);
    } else {
      invalid.push({ kind: parsed.kind, name: parsed.name, reason: `${parsed.reason} (${where})` });
    }
  }
  const objects = [...byKey.values()];
  return {
    services: objects.filter((o): o is Service => o.kind === "Service"),
    endpointSlices: objects.filter((o): o is EndpointSlice => o.kind === "EndpointSlice"),
    nodes: objects.filter((o): o is Node => o.kind === "Node"),
    serviceCIDRs: objects.filter((o): o is ServiceCIDR => o.kind === "ServiceCIDR"),
    invalid,
    ignored,
    duplicates,
  };
}

function isListKind(kind: unknown): boolean {
  return typeof kind === "string" && kind.endsWith("List") && kind.length >= "List".length;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
