// Turns the text of a Kubernetes YAML or JSON file into validated model objects. Pure: the file
// source does the I/O and the logging, so every rule here is tested on strings.

import { EventLoopTurns } from "../../lib/event-loop-turns.ts";
import type { EndpointSlice, KubeKind, KubeObject, Node, Service, ServiceCIDR } from "../../model/kube.ts";
import { objectKey } from "../../model/kube.ts";
import { parseKubeObject } from "../../model/validate.ts";
import type { InvalidObject } from "../../observability/invalid.ts";
import { GuessedOutlineFailed, type JsonReadOptions, jsonObjects, looksLikeJson } from "./json-objects.ts";
import { NotWindowable, type ReadAt, type WindowedJsonOptions, windowedJsonObjects } from "./json-windows.ts";
import { isPlainObject, type LocatedObject, UnreadableFile } from "./located.ts";
import { yamlObjects } from "./yaml-objects.ts";

/** What a readable file holds, by kind, once each object has been validated. */
export interface ClusterFileContents {
  readonly services: readonly Service[];
  readonly endpointSlices: readonly EndpointSlice[];
  readonly nodes: readonly Node[];
  /** The cluster's Service IP ranges (kind: ServiceCIDR). */
  readonly serviceCIDRs: readonly ServiceCIDR[];
  /**
   * Each kind's objects by key (objectKey), in the order of its list above: the file source
   * hands them to the store (ClusterSink.replaceByKey), which may keep them as its own maps, so
   * each key is made and filed once. Nothing else may use them after.
   */
  readonly byKey: Readonly<Record<KubeKind, Map<string, KubeObject>>>;
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
type ClusterFileParse =
  | { readonly ok: true; readonly contents: ClusterFileContents }
  | { readonly ok: false; readonly error: string };

/**
 * Parses every document of `content` (the file's text, or its bytes as read). A document may be
 * one object, a `kind: List` or a typed list such as `ServiceList` (whose items, as the API returns
 * them, carry no `kind`). Objects without a namespace get `defaultNamespace`. `fileName` only
 * labels positions in messages; `json` is for tests.
 */
export function parseClusterFile(
  content: string | Uint8Array,
  fileName: string,
  defaultNamespace = "default",
  json: JsonReadOptions = {},
): ClusterFileParse {
  const read = (objects: () => Iterable<LocatedObject>): ClusterFileParse => {
    try {
      return { ok: true, contents: validateObjects(objects(), defaultNamespace) };
    } catch (err) {
      if (err instanceof UnreadableFile) return { ok: false, error: err.message };
      // A large JSON list read by guessed item boundaries: read it again, outlined exactly.
      if (err instanceof GuessedOutlineFailed)
        return read(() => readObjects(content, fileName, { ...json, exactOutline: true }));
      throw err;
    }
  };
  const parsed = read(() => readObjects(content, fileName, json));
  if (parsed.ok || !looksLikeJson(content) || content.length > MAX_YAML_RETRY_BYTES) return parsed;
  // Text that opens like JSON but is not JSON may be YAML in flow style; if it is not that either,
  // the YAML parser's message places the mistake.
  return read(() => yamlObjects(asText(content, fileName), fileName));
}

/** How a long read shares the event loop, and how it is stopped. */
interface ReadPacing {
  readonly turns: EventLoopTurns;
  /** Stops the read at its next turn (it rejects with the signal's reason). */
  readonly signal?: AbortSignal;
}

/**
 * The contents of a large JSON List read from its file a window at a time; undefined when the
 * file is anything else (windowedJsonObjects), which parseClusterFile then reads whole. Between
 * objects it gives the event loop a turn whenever `pacing.turns` says so.
 */
export async function parseJsonListInWindows(
  read: ReadAt,
  options: WindowedJsonOptions,
  defaultNamespace = "default",
  { turns, signal }: ReadPacing = { turns: new EventLoopTurns() },
): Promise<ClusterFileContents | undefined> {
  const sorted = new SortedObjects(defaultNamespace);
  try {
    for (const located of windowedJsonObjects(read, options)) {
      sorted.add(located);
      const turn = turns.due();
      if (turn === undefined) continue;
      await turn;
      signal?.throwIfAborted();
    }
  } catch (err) {
    if (err instanceof NotWindowable) return undefined;
    throw err;
  }
  return sorted.contents();
}

/** Broken JSON larger than this is reported as JSON, without a second try as YAML. */
const MAX_YAML_RETRY_BYTES = 64 * 2 ** 20;

/**
 * The first stage of parseClusterFile: the raw objects of the content, before validation, read as
 * they are iterated. Iterating throws UnreadableFile for a file that cannot be used as a whole.
 */
export function readObjects(
  content: string | Uint8Array,
  fileName: string,
  json: JsonReadOptions = {},
): Iterable<LocatedObject> {
  // kubectl -o json output parses many times faster as JSON than through a YAML parser.
  if (looksLikeJson(content)) return jsonObjects(asBytes(content), fileName, json);
  return yamlObjects(asText(content, fileName), fileName);
}

function asBytes(content: string | Uint8Array): Buffer {
  return typeof content === "string"
    ? Buffer.from(content, "utf8")
    : Buffer.from(content.buffer, content.byteOffset, content.byteLength);
}

function asText(content: string | Uint8Array, fileName: string): string {
  if (typeof content === "string") return content;
  try {
    return asBytes(content).toString("utf8");
  } catch {
    // Only JSON is read without holding the whole text as one string.
    throw new UnreadableFile(
      `${fileName}: ${(content.length / 2 ** 20).toFixed(0)} MiB is too large to read as YAML; write it as JSON (kubectl get -o json)`,
    );
  }
}

/** The second stage of parseClusterFile: validates each object and sorts the good ones by kind. */
export function validateObjects(
  located: Iterable<LocatedObject>,
  defaultNamespace: string,
): ClusterFileContents {
  const sorted = new SortedObjects(defaultNamespace);
  for (const object of located) sorted.add(object);
  return sorted.contents();
}

/** Objects validated one at a time, sorted by kind; the last definition of a key wins. */
class SortedObjects {
  readonly #defaultNamespace: string;
  /** Per kind, by objectKey: one key string per object, which the store takes on (see byKey). */
  readonly #byKind: Readonly<Record<KubeKind, Map<string, KubeObject>>> = {
    Service: new Map(),
    EndpointSlice: new Map(),
    Node: new Map(),
    ServiceCIDR: new Map(),
  };
  readonly #invalid: InvalidObject[] = [];
  readonly #ignored: string[] = [];
  readonly #duplicates: string[] = [];

  constructor(defaultNamespace: string) {
    this.#defaultNamespace = defaultNamespace;
  }

  add({ raw, where }: LocatedObject): void {
    if (!isPlainObject(raw)) {
      this.#invalid.push({ kind: "", name: where(), reason: `not an object (${where()})` });
      return;
    }
    const parsed = parseKubeObject(raw, this.#defaultNamespace);
    if (parsed.ok) {
      const object = parsed.value;
      const byKey = this.#byKind[object.kind];
      const key = objectKey(object.metadata);
      const size = byKey.size;
      byKey.set(key, object);
      if (byKey.size === size) {
        this.#duplicates.push(`${object.kind} ${key}`);
        // Set again after a delete: the map keeps the order of the definition that wins.
        byKey.delete(key);
        byKey.set(key, object);
      }
    } else if (parsed.ignored === true) {
      this.#ignored.push(`${parsed.kind} ${parsed.name}`);
    } else {
      this.#invalid.push({ kind: parsed.kind, name: parsed.name, reason: `${parsed.reason} (${where()})` });
    }
  }

  contents(): ClusterFileContents {
    const { Service, EndpointSlice, Node, ServiceCIDR } = this.#byKind;
    return {
      services: [...Service.values()] as Service[],
      endpointSlices: [...EndpointSlice.values()] as EndpointSlice[],
      nodes: [...Node.values()] as Node[],
      serviceCIDRs: [...ServiceCIDR.values()] as ServiceCIDR[],
      byKey: this.#byKind,
      invalid: this.#invalid,
      ignored: this.#ignored,
      duplicates: this.#duplicates,
    };
  }
}
