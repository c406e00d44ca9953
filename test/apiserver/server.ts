// A Kubernetes API server for tests: Services, EndpointSlices, Nodes, Pods, Events and Leases over
// the real list/watch protocol (chunked JSON-lines watches, resourceVersion semantics, pagination,
// bookmarks, label and field selectors, 410 Expired), with knobs to misbehave: drop connections, go silent, fail
// with 5xx, withhold a resource, stop and restart on the same port. Writes check resourceVersion
// preconditions (PUT's metadata.resourceVersion, DELETE's preconditions) and answer 409 Conflict.
//
// In-process: `const api = await TestApiServer.start(); api.create({...}); … await api.close();`
// As a script: `node test/apiserver/server.ts [--port N] [--bookmark-interval-ms N]`, then
// POST/PUT/DELETE objects with curl like a real API server.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import {
  type FieldSelector,
  type LabelSelector,
  parseFieldSelector,
  parseLabelSelector,
} from "./selectors.ts";
import {
  expired,
  groupVersionPath,
  keyOf,
  ObjectStore,
  type RawObject,
  RESOURCES,
  type ResourceType,
  resourceOfKind,
  StoreError,
  type StoreEvent,
} from "./store.ts";

export type { RawObject } from "./store.ts";

export interface TestApiServerOptions {
  /** 0 picks a free port. */
  readonly port?: number;
  readonly host?: string;
  /** How often a watch with allowWatchBookmarks gets a BOOKMARK; 0 disables. Default 1000 ms. */
  readonly bookmarkIntervalMs?: number;
  /** How a watch from a compacted revision is refused: an HTTP 410, or a 200 with an ERROR event. */
  readonly expiredWatchAs?: "status" | "event";
  /**
   * The networking.k8s.io versions that serve ServiceCIDRs; default ["v1"]. [] plays an older
   * cluster (every ServiceCIDR path is a 404), ["v1beta1"] one from before the API went GA.
   */
  readonly serviceCIDRVersions?: readonly ("v1" | "v1beta1")[];
}

export interface RecordedRequest {
  readonly method: string;
  readonly resource: string;
  readonly watch: boolean;
  readonly query: URLSearchParams;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** Date.now() when it arrived. */
  readonly at: number;
}

interface Route {
  readonly type: ResourceType;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
}

interface Watcher {
  readonly type: ResourceType;
  readonly res: ServerResponse;
  readonly matches: (o: RawObject) => boolean;
  /** A stalled watcher never writes again, as a connection behind a black hole. */
  stalled: boolean;
  close(): void;
}

const ROUTE =
  /^\/(api\/v1|apis\/[a-z0-9.]+\/v1(?:beta1)?)\/(?:namespaces\/([^/]+)\/)?([a-z]+)(?:\/([^/]+))?\/?$/;

/**
 * Whether a resource is served under a group-version prefix: at its own group version, except
 * ServiceCIDRs, served at the networking.k8s.io versions this server plays (v1 and/or v1beta1).
 */
function servedHere(type: ResourceType, prefix: string, serviceCIDRVersions: readonly string[]): boolean {
  if (type.resource === "servicecidrs") {
    const version = /^apis\/networking\.k8s\.io\/(v1|v1beta1)$/.exec(prefix)?.[1];
    return version !== undefined && serviceCIDRVersions.includes(version);
  }
  return groupVersionPath(type) === prefix;
}

function status(code: number, reason: string, message: string): Record<string, unknown> {
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code };
}

const REASONS: Readonly<Record<number, string>> = {
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
  429: "TooManyRequests",
};

export class TestApiServer {
  readonly store = new ObjectStore();
  readonly requests: RecordedRequest[] = [];
  readonly #options: Required<TestApiServerOptions>;
  #server: Server | undefined;
  #port: number;
  readonly #sockets = new Set<Socket>();
  readonly #watchers = new Set<Watcher>();
  /** Requests that are never answered (silence) or answered on release (withhold). */
  readonly #held = new Set<ServerResponse>();
  readonly #withheld = new Map<string, (() => void)[]>();
  #silent = false;
  /** Hostile modes: lists sent one byte at a time, watches that send one line without end. */
  #trickleMs: number | undefined;
  #endlessWatchLine = false;
  #failure: { status: number; remaining: number } | undefined;
  /** Per resource, the last list's snapshot (lists of several resources run side by side). */
  readonly #lastList = new Map<string, { readonly key: string; readonly items: RawObject[] }>();

  private constructor(options: TestApiServerOptions) {
    this.#options = {
      port: options.port ?? 0,
      host: options.host ?? "127.0.0.1",
      bookmarkIntervalMs: options.bookmarkIntervalMs ?? 1000,
      expiredWatchAs: options.expiredWatchAs ?? "event",
      serviceCIDRVersions: options.serviceCIDRVersions ?? ["v1"],
    };
    this.#port = this.#options.port;
    this.store.subscribe((event) => this.#dispatch(event));
  }

  static async start(options: TestApiServerOptions = {}): Promise<TestApiServer> {
    const server = new TestApiServer(options);
    await server.listen();
    return server;
  }

  get port(): number {
    return this.#port;
  }

  get url(): string {
    return `http://${this.#options.host}:${this.#port}`;
  }

  /** Number of open watch streams (stalled ones included). */
  get watchCount(): number {
    return this.#watchers.size;
  }

  // ── objects ────────────────────────────────────────────────────────────────────────────────

  create(object: RawObject & { kind: string }): RawObject {
    return this.store.create(resourceOfKind(object.kind), object);
  }

  update(object: RawObject & { kind: string }): RawObject {
    return this.store.update(resourceOfKind(object.kind), object);
  }

  /** Creates or updates. */
  apply(object: RawObject & { kind: string }): RawObject {
    const type = resourceOfKind(object.kind);
    return this.store.get(type.resource, keyOf({ namespace: "default", ...object.metadata }))
      ? this.store.update(type, object)
      : this.store.create(type, object);
  }

  delete(kind: string, key: string): RawObject {
    return this.store.delete(resourceOfKind(kind), key);
  }

  get(kind: string, key: string): RawObject | undefined {
    return this.store.get(resourceOfKind(kind).resource, key);
  }

  /** Drops the event history: watches and continue tokens from older revisions get 410 Expired. */
  compact(): void {
    this.store.compact();
  }

  /**
   * Sends an in-stream ERROR 410 to every open watch and closes it, as the real watch cache does
   * to a watcher that fell out of its window.
   */
  expireWatches(): void {
    for (const w of this.#watchers) {
      if (w.stalled) continue;
      w.res.write(
        `${JSON.stringify({ type: "ERROR", object: status(410, "Expired", "too old resource version") })}\n`,
      );
      w.close();
    }
  }

  // ── knobs ─────────────────────────────────────────────────────────────────────────────────

  /** Destroys every open connection (lists and watches) without a clean close. */
  dropConnections(): void {
    for (const w of this.#watchers) w.close();
    for (const socket of this.#sockets) socket.destroy();
    this.#held.clear();
  }

  /**
   * While silent, open watches stop sending (and stay stalled for good, like connections behind a
   * black hole) and new requests are accepted but never answered.
   */
  silence(silent = true): void {
    this.#silent = silent;
    if (silent) for (const w of this.#watchers) w.stalled = true;
  }

  /** Answers the next `count` requests with `status` (e.g. 500, 503). */
  fail(statusCode: number, count = Number.POSITIVE_INFINITY): void {
    this.#failure = { status: statusCode, remaining: count };
  }

  stopFailing(): void {
    this.#failure = undefined;
  }

  /** Sends list bodies one byte every `ms` (undefined: at once), as a crawling connection would. */
  trickleLists(ms: number | undefined): void {
    this.#trickleMs = ms;
  }

  /** Makes new watches send one line that never ends (until the connection closes). */
  endlessWatchLine(on = true): void {
    this.#endlessWatchLine = on;
  }

  /** Holds list and watch requests for a resource ("services", …) until released. */
  withhold(resource: string, held = true): void {
    if (held) {
      if (!this.#withheld.has(resource)) this.#withheld.set(resource, []);
      return;
    }
    const waiting = this.#withheld.get(resource) ?? [];
    this.#withheld.delete(resource);
    for (const resume of waiting) resume();
  }

  async listen(): Promise<void> {
    const server = createServer((req, res) => this.#handle(req, res));
    server.on("connection", (socket) => {
      this.#sockets.add(socket);
      socket.on("close", () => this.#sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.#port, this.#options.host, () => resolve());
    });
    const address = server.address();
    if (address && typeof address === "object") this.#port = address.port;
    this.#server = server;
  }

  /** Stops listening and drops every connection; the store is kept. */
  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    this.dropConnections();
    server.closeAllConnections();
    await closed;
  }

  /** Stops, then listens again on the same port, keeping the objects or losing them. */
  async restart(options: { keepState: boolean; downMs?: number }): Promise<void> {
    await this.stop();
    if (!options.keepState) this.store.wipe();
    if (options.downMs) await new Promise((r) => setTimeout(r, options.downMs));
    await this.listen();
  }

  async close(): Promise<void> {
    this.#silent = false;
    for (const [resource] of this.#withheld) this.withhold(resource, false);
    await this.stop();
  }

  // ── protocol ──────────────────────────────────────────────────────────────────────────────

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://localhost");
    const match = ROUTE.exec(url.pathname);
    const found = match ? RESOURCES[match[3]!] : undefined;
    const type =
      found && servedHere(found, match![1]!, this.#options.serviceCIDRVersions) ? found : undefined;
    if (!match || !type) {
      this.#sendStatus(
        res,
        404,
        "NotFound",
        `the server could not find the requested resource (${url.pathname})`,
      );
      return;
    }
    const route: Route = { type, namespace: match[2], name: match[4] };
    const watch = url.searchParams.get("watch") === "1" || url.searchParams.get("watch") === "true";
    const method = req.method ?? "GET";
    this.requests.push({
      method,
      resource: type.resource,
      watch,
      query: url.searchParams,
      headers: req.headers,
      at: Date.now(),
    });

    if (this.#silent) {
      this.#held.add(res);
      res.on("close", () => this.#held.delete(res));
      return;
    }
    if (this.#failure && this.#failure.remaining > 0) {
      this.#failure.remaining--;
      const code = this.#failure.status;
      this.#sendStatus(res, code, REASONS[code] ?? "InternalError", `injected failure ${code}`);
      return;
    }
    const waiting = method === "GET" ? this.#withheld.get(type.resource) : undefined;
    if (waiting) {
      waiting.push(() => this.#serve(req, res, route, url.searchParams, watch, method));
      return;
    }
    this.#serve(req, res, route, url.searchParams, watch, method);
  }

  #serve(
    req: IncomingMessage,
    res: ServerResponse,
    route: Route,
    query: URLSearchParams,
    watch: boolean,
    method: string,
  ): void {
    if (res.destroyed) return;
    try {
      if (method === "GET" && watch) this.#watch(res, route, query);
      else if (method === "GET" && route.name === undefined) this.#list(res, route, query);
      else if (method === "GET") this.#getOne(res, route);
      else if (method === "POST" || method === "PUT" || method === "DELETE")
        this.#write(req, res, route, method);
      else this.#sendStatus(res, 405, "MethodNotAllowed", `method ${method} not allowed`);
    } catch (err) {
      if (err instanceof StoreError) this.#sendStatus(res, err.code, err.reason, err.message);
      else this.#sendStatus(res, 500, "InternalError", String(err));
    }
  }

  #selectors(route: Route, query: URLSearchParams): (o: RawObject) => boolean {
    let labels: LabelSelector | undefined;
    let fields: FieldSelector | undefined;
    try {
      labels = parseLabelSelector(query.get("labelSelector") ?? "");
      fields = parseFieldSelector(query.get("fieldSelector") ?? "");
    } catch (err) {
      throw new StoreError(400, "BadRequest", (err as Error).message);
    }
    return (o) =>
      (route.namespace === undefined || o.metadata.namespace === route.namespace) &&
      labels.matches(o.metadata.labels ?? {}) &&
      fields.matches({ name: o.metadata.name, namespace: o.metadata.namespace ?? "" });
  }

  #list(res: ServerResponse, route: Route, query: URLSearchParams): void {
    const matches = this.#selectors(route, query);
    const limit = Number(query.get("limit") ?? "0");
    const token = query.get("continue");
    let rv = this.store.currentRv;
    let after = "";
    if (token) {
      const parsed = decodeContinue(token);
      if (!parsed) throw new StoreError(400, "BadRequest", "invalid continue token");
      if (!this.store.isAvailable(parsed.rv)) {
        throw new StoreError(
          410,
          "Expired",
          "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
        );
      }
      rv = parsed.rv;
      after = parsed.after;
    }
    const all = this.#listed(route, query, rv, matches);
    const start = firstKeyAfter(all, after);
    const restLength = all.length - start;
    const page = all.slice(start, limit > 0 ? start + limit : all.length);
    const metadata: Record<string, unknown> = { resourceVersion: String(rv) };
    if (page.length < restLength) {
      metadata.continue = encodeContinue({ rv, after: keyOf(page[page.length - 1]!.metadata) });
      metadata.remainingItemCount = restLength - page.length;
    }
    const body = { kind: route.type.listKind, apiVersion: route.type.apiVersion, metadata, items: page };
    if (this.#trickleMs !== undefined) this.#trickle(res, JSON.stringify(body), this.#trickleMs);
    else this.#sendJson(res, 200, body);
  }

  /**
   * The objects a list at `rv` returns, sorted by key. A paginated list asks for the same snapshot
   * once per page: the last one is kept, so a list of N objects in pages costs O(N), not O(N²).
   * A snapshot at a revision never changes (objects are replaced, never mutated).
   */
  #listed(route: Route, query: URLSearchParams, rv: number, matches: (o: RawObject) => boolean): RawObject[] {
    const key = [
      rv,
      route.namespace ?? "",
      query.get("labelSelector") ?? "",
      query.get("fieldSelector") ?? "",
    ].join("\n");
    const last = this.#lastList.get(route.type.resource);
    if (last?.key === key) return last.items;
    const items = this.store.snapshot(route.type.resource, rv).filter(matches);
    this.#lastList.set(route.type.resource, { key, items });
    return items;
  }

  #trickle(res: ServerResponse, text: string, everyMs: number): void {
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
    let at = 0;
    const timer = setInterval(() => {
      if (res.destroyed || at >= text.length) {
        clearInterval(timer);
        if (!res.destroyed) res.end();
        return;
      }
      res.write(text[at++]);
    }, everyMs);
    res.on("close", () => clearInterval(timer));
  }

  #getOne(res: ServerResponse, route: Route): void {
    const key = route.type.namespaced ? `${route.namespace ?? "default"}/${route.name}` : route.name!;
    const object = this.store.get(route.type.resource, key);
    if (!object) throw new StoreError(404, "NotFound", `${route.type.resource} "${route.name}" not found`);
    this.#sendJson(res, 200, object);
  }

  #write(req: IncomingMessage, res: ServerResponse, route: Route, method: string): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        const text = Buffer.concat(chunks).toString("utf8");
        if (method === "DELETE") {
          const key = route.type.namespaced ? `${route.namespace ?? "default"}/${route.name}` : route.name!;
          const options = (text === "" ? {} : JSON.parse(text)) as {
            preconditions?: { resourceVersion?: string };
          };
          this.#sendJson(
            res,
            200,
            this.store.delete(route.type, key, options.preconditions?.resourceVersion),
          );
          return;
        }
        const object = JSON.parse(text) as RawObject;
        if (route.namespace !== undefined) object.metadata.namespace = route.namespace;
        if (method === "PUT" && object.metadata?.name !== route.name) {
          throw new StoreError(
            400,
            "BadRequest",
            "the name of the object does not match the name on the URL",
          );
        }
        const written =
          method === "POST" ? this.store.create(route.type, object) : this.store.update(route.type, object);
        this.#sendJson(res, method === "POST" ? 201 : 200, written);
      } catch (err) {
        if (err instanceof StoreError) this.#sendStatus(res, err.code, err.reason, err.message);
        else this.#sendStatus(res, 400, "BadRequest", String(err));
      }
    });
  }

  #watch(res: ServerResponse, route: Route, query: URLSearchParams): void {
    const matches = this.#selectors(route, query);
    const rvParam = query.get("resourceVersion") ?? "";
    const fromRv = rvParam === "" || rvParam === "0" ? undefined : Number(rvParam);
    if (fromRv !== undefined && (!Number.isInteger(fromRv) || fromRv < 0)) {
      throw new StoreError(400, "BadRequest", `invalid resourceVersion ${JSON.stringify(rvParam)}`);
    }
    if (fromRv !== undefined && fromRv > this.store.currentRv) {
      throw new StoreError(
        504,
        "Timeout",
        `Too large resource version: ${fromRv}, current: ${this.store.currentRv}`,
      );
    }
    const tooOld = fromRv !== undefined && !this.store.isAvailable(fromRv);
    if (tooOld && this.#options.expiredWatchAs === "status") throw expired(fromRv);

    res.writeHead(200, { "Content-Type": "application/json", "Cache-Control": "no-cache, private" });
    res.flushHeaders();
    if (tooOld) {
      res.end(
        `${JSON.stringify({ type: "ERROR", object: status(410, "Expired", expired(fromRv).message) })}\n`,
      );
      return;
    }

    const timers: NodeJS.Timeout[] = [];
    if (this.#endlessWatchLine) {
      res.write('{"type":"ADDED","object":{"metadata":{"name":"');
      const chunk = "x".repeat(64 * 1024);
      const flood = setInterval(() => {
        if (!res.destroyed) res.write(chunk);
      }, 5);
      timers.push(flood);
      res.on("close", () => clearInterval(flood));
      return;
    }
    const watcher: Watcher = {
      type: route.type,
      res,
      matches,
      stalled: false,
      close: () => {
        this.#watchers.delete(watcher);
        for (const t of timers) clearTimeout(t);
        if (!res.writableEnded) res.end();
      },
    };
    res.on("close", () => {
      this.#watchers.delete(watcher);
      for (const t of timers) clearTimeout(t);
    });

    // Replay happens synchronously before registering, so no event can fall in between.
    if (fromRv === undefined) {
      for (const o of this.store.snapshot(route.type.resource, this.store.currentRv)) {
        if (matches(o)) this.#send(watcher, "ADDED", o);
      }
    } else {
      for (const event of this.store.eventsAfter(route.type.resource, fromRv)) this.#deliver(watcher, event);
    }
    this.#watchers.add(watcher);

    const timeoutSeconds = Number(query.get("timeoutSeconds") ?? "0");
    if (timeoutSeconds > 0) timers.push(setTimeout(() => watcher.close(), timeoutSeconds * 1000));
    const bookmarks = query.get("allowWatchBookmarks") === "true" || query.get("allowWatchBookmarks") === "1";
    if (bookmarks && this.#options.bookmarkIntervalMs > 0) {
      const interval = setInterval(() => {
        if (watcher.stalled) return;
        const object = {
          kind: route.type.kind,
          apiVersion: route.type.apiVersion,
          metadata: { resourceVersion: String(this.store.currentRv) },
        };
        res.write(`${JSON.stringify({ type: "BOOKMARK", object })}\n`);
      }, this.#options.bookmarkIntervalMs);
      timers.push(interval);
    }
  }

  #dispatch(event: StoreEvent): void {
    for (const w of this.#watchers) if (w.type.resource === event.resource) this.#deliver(w, event);
  }

  /** Sends what a watcher with a selector sees of a change: an object leaving the selection is a DELETED. */
  #deliver(watcher: Watcher, event: StoreEvent): void {
    const before = event.prev !== undefined && watcher.matches(event.prev);
    const after = event.type !== "DELETED" && watcher.matches(event.object);
    if (event.type === "DELETED") {
      if (before) this.#send(watcher, "DELETED", event.object);
    } else if (before && after) {
      this.#send(watcher, "MODIFIED", event.object);
    } else if (after) {
      this.#send(watcher, "ADDED", event.object);
    } else if (before) {
      const gone = structuredClone(event.prev!);
      gone.metadata.resourceVersion = String(event.rv);
      this.#send(watcher, "DELETED", gone);
    }
  }

  #send(watcher: Watcher, type: string, object: RawObject): void {
    if (watcher.stalled || watcher.res.writableEnded) return;
    watcher.res.write(`${JSON.stringify({ type, object })}\n`);
  }

  #sendJson(res: ServerResponse, code: number, body: unknown): void {
    if (res.destroyed) return;
    const text = JSON.stringify(body);
    res.writeHead(code, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
    res.end(text);
  }

  #sendStatus(res: ServerResponse, code: number, reason: string, message: string): void {
    this.#sendJson(res, code, status(code, reason, message));
  }
}

interface ContinueToken {
  readonly rv: number;
  readonly after: string;
}

function encodeContinue(token: ContinueToken): string {
  return Buffer.from(JSON.stringify(token)).toString("base64url");
}

function decodeContinue(token: string): ContinueToken | undefined {
  try {
    const parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as Partial<ContinueToken>;
    return typeof parsed.rv === "number" && typeof parsed.after === "string"
      ? { rv: parsed.rv, after: parsed.after }
      : undefined;
  } catch {
    return undefined;
  }
}

/** The index of the first object whose key sorts after `after` in a list sorted by key. */
function firstKeyAfter(sorted: readonly RawObject[], after: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keyOf(sorted[mid]!.metadata) > after) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const flag = (name: string): number | undefined => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : undefined;
  };
  const server = await TestApiServer.start({
    port: flag("--port") ?? 8080,
    bookmarkIntervalMs: flag("--bookmark-interval-ms") ?? 60_000,
  });
  process.stdout.write(`test API server listening on ${server.url}\n`);
  const shutdown = () => void server.close().then(() => process.exit(0));
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
}

if (import.meta.main) await main();
