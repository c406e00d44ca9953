// The test API server's storage: an etcd-like in-memory store with one global revision counter,
// per-object resourceVersion, and an event history that can be compacted. A list at an older
// revision is rebuilt by undoing history, so paginated lists read one consistent snapshot.

export type RawObject = { metadata: RawMeta; [field: string]: unknown };
export interface RawMeta {
  name: string;
  namespace?: string;
  resourceVersion?: string;
  uid?: string;
  labels?: Record<string, string>;
  [field: string]: unknown;
}

export interface ResourceType {
  readonly resource: string;
  readonly kind: string;
  readonly listKind: string;
  readonly apiVersion: string;
  readonly namespaced: boolean;
}

export const RESOURCES: Readonly<Record<string, ResourceType>> = {
  services: {
    resource: "services",
    kind: "Service",
    listKind: "ServiceList",
    apiVersion: "v1",
    namespaced: true,
  },
  endpointslices: {
    resource: "endpointslices",
    kind: "EndpointSlice",
    listKind: "EndpointSliceList",
    apiVersion: "discovery.k8s.io/v1",
    namespaced: true,
  },
  nodes: { resource: "nodes", kind: "Node", listKind: "NodeList", apiVersion: "v1", namespaced: false },
  pods: { resource: "pods", kind: "Pod", listKind: "PodList", apiVersion: "v1", namespaced: true },
  events: { resource: "events", kind: "Event", listKind: "EventList", apiVersion: "v1", namespaced: true },
  leases: {
    resource: "leases",
    kind: "Lease",
    listKind: "LeaseList",
    apiVersion: "coordination.k8s.io/v1",
    namespaced: true,
  },
  servicecidrs: {
    resource: "servicecidrs",
    kind: "ServiceCIDR",
    listKind: "ServiceCIDRList",
    apiVersion: "networking.k8s.io/v1",
    namespaced: false,
  },
};

/** The API group/version a resource is served under, as it appears in the request path. */
export function groupVersionPath(type: ResourceType): string {
  return type.apiVersion === "v1" ? "api/v1" : `apis/${type.apiVersion}`;
}

/** The 409 a write with a stale resourceVersion precondition gets, worded as the API server does. */
export function conflict(type: ResourceType, name: string): StoreError {
  const group = type.apiVersion.includes("/") ? `.${type.apiVersion.split("/")[0]}` : "";
  return new StoreError(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${type.resource}${group} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
  );
}

export function resourceOfKind(kind: string): ResourceType {
  const found = Object.values(RESOURCES).find((r) => r.kind === kind);
  if (!found) throw new Error(`unknown kind ${JSON.stringify(kind)}`);
  return found;
}

export type EventType = "ADDED" | "MODIFIED" | "DELETED";

export interface StoreEvent {
  readonly rv: number;
  readonly resource: string;
  readonly key: string;
  readonly type: EventType;
  /** The state after the event; for DELETED, the last state stamped with the deletion revision. */
  readonly object: RawObject;
  /** The state before the event (absent for ADDED). */
  readonly prev: RawObject | undefined;
}

export class StoreError extends Error {
  readonly code: number;
  readonly reason: string;
  constructor(code: number, reason: string, message: string) {
    super(message);
    this.code = code;
    this.reason = reason;
  }
}

export function keyOf(meta: RawMeta): string {
  return meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
}

export class ObjectStore {
  #rv = 100;
  #uid = 0;
  /** Revisions up to and including this one are compacted away. */
  #compactedRv = 0;
  readonly #objects = new Map<string, Map<string, RawObject>>();
  #history: StoreEvent[] = [];
  readonly #listeners = new Set<(event: StoreEvent) => void>();

  get currentRv(): number {
    return this.#rv;
  }

  get compactedRv(): number {
    return this.#compactedRv;
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #table(resource: string): Map<string, RawObject> {
    let table = this.#objects.get(resource);
    if (!table) {
      table = new Map();
      this.#objects.set(resource, table);
    }
    return table;
  }

  #normalise(type: ResourceType, input: RawObject): RawObject {
    const object = structuredClone(input);
    if (typeof object.metadata?.name !== "string" || object.metadata.name === "") {
      throw new StoreError(422, "Invalid", "metadata.name: Required value");
    }
    object.kind = type.kind;
    object.apiVersion = type.apiVersion;
    if (type.namespaced) object.metadata.namespace ??= "default";
    else delete object.metadata.namespace;
    return object;
  }

  #record(
    type: ResourceType,
    eventType: EventType,
    object: RawObject,
    prev: RawObject | undefined,
  ): StoreEvent {
    const event: StoreEvent = {
      rv: this.#rv,
      resource: type.resource,
      key: keyOf(object.metadata),
      type: eventType,
      object,
      prev,
    };
    this.#history.push(event);
    for (const listener of this.#listeners) listener(event);
    return event;
  }

  get(resource: string, key: string): RawObject | undefined {
    const found = this.#table(resource).get(key);
    return found && structuredClone(found);
  }

  create(type: ResourceType, input: RawObject): RawObject {
    const object = this.#normalise(type, input);
    if (object.metadata.resourceVersion !== undefined && object.metadata.resourceVersion !== "") {
      throw new StoreError(400, "BadRequest", "resourceVersion should not be set on objects to be created");
    }
    const key = keyOf(object.metadata);
    const table = this.#table(type.resource);
    if (table.has(key))
      throw new StoreError(409, "AlreadyExists", `${type.resource} "${key}" already exists`);
    this.#rv++;
    object.metadata.resourceVersion = String(this.#rv);
    object.metadata.uid ??= `00000000-0000-4000-8000-${String(++this.#uid).padStart(12, "0")}`;
    object.metadata.creationTimestamp ??= new Date().toISOString();
    table.set(key, object);
    this.#record(type, "ADDED", object, undefined);
    return structuredClone(object);
  }

  update(type: ResourceType, input: RawObject): RawObject {
    const object = this.#normalise(type, input);
    const key = keyOf(object.metadata);
    const table = this.#table(type.resource);
    const prev = table.get(key);
    if (!prev) throw new StoreError(404, "NotFound", `${type.resource} "${key}" not found`);
    const precondition = object.metadata.resourceVersion;
    if (precondition !== undefined && precondition !== "" && precondition !== prev.metadata.resourceVersion) {
      throw conflict(type, object.metadata.name);
    }
    this.#rv++;
    object.metadata.resourceVersion = String(this.#rv);
    object.metadata.uid = prev.metadata.uid;
    object.metadata.creationTimestamp = prev.metadata.creationTimestamp;
    table.set(key, object);
    this.#record(type, "MODIFIED", object, prev);
    return structuredClone(object);
  }

  /** With a resourceVersion precondition (DeleteOptions.preconditions), a stale one gets 409. */
  delete(type: ResourceType, key: string, preconditionRv?: string): RawObject {
    const table = this.#table(type.resource);
    const prev = table.get(key);
    if (!prev) throw new StoreError(404, "NotFound", `${type.resource} "${key}" not found`);
    if (preconditionRv !== undefined && preconditionRv !== prev.metadata.resourceVersion) {
      throw conflict(type, prev.metadata.name);
    }
    this.#rv++;
    table.delete(key);
    const object = structuredClone(prev);
    object.metadata.resourceVersion = String(this.#rv);
    this.#record(type, "DELETED", object, prev);
    return structuredClone(object);
  }

  /** Drops all history: a watch or continue token from an older revision now gets 410 Expired. */
  compact(): void {
    // The compaction takes a revision of its own, so every revision a client holds is now older.
    this.#rv++;
    this.#compactedRv = this.#rv;
    this.#history = [];
  }

  /** Loses every object (as a wiped etcd would) while keeping revisions monotonic. */
  wipe(): void {
    this.#objects.clear();
    this.compact();
  }

  /** Whether a watch or snapshot at `rv` can still be served. */
  isAvailable(rv: number): boolean {
    return rv >= this.#compactedRv;
  }

  /** Events after `rv`, oldest first. Throws 410 when history no longer reaches back that far. */
  eventsAfter(resource: string, rv: number): StoreEvent[] {
    if (!this.isAvailable(rv)) throw expired(rv);
    return this.#history.filter((e) => e.resource === resource && e.rv > rv);
  }

  /** The objects of a resource as they were at revision `rv`, sorted by key. */
  snapshot(resource: string, rv: number): RawObject[] {
    if (!this.isAvailable(rv)) throw expired(rv);
    const state = new Map(this.#table(resource));
    for (let i = this.#history.length - 1; i >= 0; i--) {
      const event = this.#history[i]!;
      if (event.rv <= rv) break;
      if (event.resource !== resource) continue;
      if (event.prev) state.set(event.key, event.prev);
      else state.delete(event.key);
    }
    return [...state.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, o]) => o);
  }
}

export function expired(rv: number): StoreError {
  return new StoreError(410, "Expired", `too old resource version: ${rv}`);
}
