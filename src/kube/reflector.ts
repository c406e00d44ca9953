// One resource's list/watch loop: list (paginated) into the sink, then watch from the list's
// resourceVersion, resuming from the last one seen (bookmarks included) whenever a watch ends.
// A 410 Expired means history moved past us: list again and replace, which deletes what vanished.
// Nothing here is fatal: every failure is logged, counted, and retried with backoff, forever.
// While the API server is unreachable the sink keeps what it has: only a successful list removes.

import { type AnswerDeadline, answerDeadline } from "../lib/answer-deadline.ts";
import { Backoff, type BackoffOptions, DEFAULT_BACKOFF } from "../lib/backoff.ts";
import { sleep } from "../lib/sleep.ts";
import { gatheringList, type ListWriter } from "../model/global.ts";
import type { KubeKind, KubeObject } from "../model/kube.ts";
import { objectKey } from "../model/kube.ts";
import type { ParseResult } from "../model/validate.ts";
import { reportInvalidObject } from "../observability/invalid.ts";
import type { Logger } from "../observability/log.ts";
import { JsonLineSplitter } from "./json-lines.ts";
import {
  DEFAULT_LIST_TIMEOUT_MS,
  DEFAULT_MAX_LINE_BYTES,
  DEFAULT_MAX_LIST_BYTES,
  ReadLimitError,
} from "./limits.ts";
import { parseListBody } from "./list-body.ts";
import {
  markActivity,
  reflectorErrorsTotal,
  relistsTotal,
  resyncsTotal,
  watchEventsTotal,
} from "./metrics.ts";
import type { ApiResponse, KubeTransport } from "./transport.ts";

/** What a reflector keys objects by. */
export interface Keyed {
  readonly metadata: { readonly namespace: string; readonly name: string };
}

/** Where a reflector delivers; the brain's ClusterSink is one, a controller's cache another. */
export interface ReflectorSink<K extends string, T> {
  upsert(object: T): void;
  delete(kind: K, key: string): void;
  replace(kind: K, objects: readonly T[]): void;
  /**
   * A (re)list taken page by page as the pages arrive; a sink without it gets one replace()
   * with every object once the list is complete.
   */
  startList?(kind: K): ListWriter<T>;
}

export interface ResourceSpec<K extends string = KubeKind, T extends Keyed = KubeObject> {
  readonly kind: K;
  /** Cluster-scoped objects are keyed by name alone (Nodes always are). */
  readonly clusterScoped?: boolean;
  /** The plural resource name, for logs and metrics: "services". */
  readonly resource: string;
  /** The cluster-wide collection path: "/api/v1/services". */
  readonly path: string;
  readonly labelSelector?: string | undefined;
  readonly fieldSelector?: string | undefined;
  readonly parse: (raw: unknown) => ParseResult<T>;
}

export interface ReflectorTimings {
  /** Items per list page. */
  readonly pageSize: number;
  /** Watches ask the server to close after a random time in [min, 2×min] seconds. */
  readonly minWatchTimeoutSeconds: number;
  /** A request that receives no byte for this long is aborted and retried. */
  readonly inactivityTimeoutMs: number;
  /** A watch that ends sooner than this without any event counts as a failure (backoff). */
  readonly minHealthyWatchMs: number;
  readonly backoff: BackoffOptions;
  /** After this many 410s on continue tokens in a row, list in one page. */
  readonly maxContinueRestarts: number;
  /** A watch line (one event) longer than this aborts the watch. */
  readonly maxLineBytes: number;
  /** A list page body longer than this aborts the list. */
  readonly maxListBytes: number;
  /** A list page request that has not completed within this time is aborted. */
  readonly listTimeoutMs: number;
}

export const DEFAULT_TIMINGS: ReflectorTimings = {
  pageSize: 500,
  minWatchTimeoutSeconds: 300,
  inactivityTimeoutMs: 60_000,
  minHealthyWatchMs: 1000,
  backoff: DEFAULT_BACKOFF,
  maxContinueRestarts: 3,
  maxLineBytes: DEFAULT_MAX_LINE_BYTES,
  maxListBytes: DEFAULT_MAX_LIST_BYTES,
  listTimeoutMs: DEFAULT_LIST_TIMEOUT_MS,
};

interface ReflectorOptions {
  readonly transport: KubeTransport;
  readonly log: Logger;
  readonly timings?: Partial<ReflectorTimings>;
  readonly random?: () => number;
}

/** An error status from the API server, with the Status object's reason when it sent one. */
export class ApiStatusError extends Error {
  readonly status: number;
  readonly reason: string;
  constructor(status: number, reason: string, message: string) {
    super(`HTTP ${status} ${reason}: ${message}`);
    this.status = status;
    this.reason = reason;
  }

  get expired(): boolean {
    return this.status === 410;
  }

  /** The server has not reached the resourceVersion we asked for (e.g. it lost its state). */
  get tooLargeResourceVersion(): boolean {
    return /too large resource version/i.test(this.message);
  }
}

class InactivityError extends Error {}

interface WatchOutcome {
  readonly expired: boolean;
  /** Saw an event, or stayed open long enough: the connection works, so backoff starts over. */
  readonly healthy: boolean;
}

interface RawEvent {
  type?: unknown;
  object?: { metadata?: { name?: unknown; namespace?: unknown; resourceVersion?: unknown }; code?: unknown };
}

const MAX_ERROR_BODY = 64 * 1024;

async function readStatus(res: ApiResponse): Promise<ApiStatusError> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res) {
      size += chunk.length;
      if (size > MAX_ERROR_BODY) break;
      chunks.push(chunk);
    }
  } catch {
    // The body is only for the message.
  }
  const text = Buffer.concat(chunks).toString("utf8");
  const status = res.statusCode ?? 0;
  try {
    const body = JSON.parse(text) as { reason?: unknown; message?: unknown };
    return new ApiStatusError(status, String(body.reason ?? res.statusMessage), String(body.message ?? ""));
  } catch {
    return new ApiStatusError(status, res.statusMessage ?? "", text.slice(0, 200));
  }
}

interface OpenRequest {
  readonly res: ApiResponse;
  readonly touch: () => void;
  readonly explain: (err: unknown) => unknown;
  readonly done: () => void;
}

export class Reflector<K extends string = KubeKind, T extends Keyed = KubeObject> {
  readonly #spec: ResourceSpec<K, T>;
  readonly #sink: ReflectorSink<K, T>;
  readonly #transport: KubeTransport;
  readonly #log: Logger;
  readonly #timings: ReflectorTimings;
  readonly #random: () => number;
  readonly #backoff: Backoff;
  readonly #stop = new AbortController();
  /** The last valid copy of each object we delivered, by key: kept when an update is invalid. */
  #known = new Map<string, T>();
  #resourceVersion = "";
  /** A list was delivered: #known is what the sink holds of this resource. */
  #delivered = false;
  #running: Promise<void> | undefined;
  #markListed!: () => void;
  /** Resolves after the first complete list has been delivered to the sink. */
  readonly listed: Promise<void>;

  constructor(spec: ResourceSpec<K, T>, sink: ReflectorSink<K, T>, options: ReflectorOptions) {
    this.#spec = spec;
    this.#sink = sink;
    this.#transport = options.transport;
    this.#log = options.log.child({ resource: spec.resource });
    this.#timings = { ...DEFAULT_TIMINGS, ...options.timings };
    this.#random = options.random ?? Math.random;
    this.#backoff = new Backoff({ random: this.#random, ...this.#timings.backoff });
    this.listed = new Promise((resolve) => {
      this.#markListed = resolve;
    });
  }

  /** The resourceVersion the next watch resumes from ("" before the first list). */
  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  start(): void {
    this.#running ??= this.#run();
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#running;
  }

  /**
   * Hands the sink every object it was given, again, as one replace (kube-proxy's
   * configSyncPeriod resync): a safety net that repairs a sink which lost or changed what it was
   * told; a sink that holds it already changes nothing. Nothing before the first list.
   */
  resync(): void {
    if (!this.#delivered || this.#stop.signal.aborted) return;
    resyncsTotal.inc({ resource: this.#spec.resource });
    this.#deliver(() => this.#sink.replace(this.#spec.kind, [...this.#known.values()]));
  }

  async #run(): Promise<void> {
    let listReason = "initial";
    // The first 410 relists at once; a server that keeps answering 410 gets backoff.
    let expiredInARow = 0;
    while (!this.#stop.signal.aborted) {
      let delay = 0;
      try {
        if (this.#resourceVersion === "") {
          this.#resourceVersion = await this.#list(listReason);
          this.#markListed();
        }
        const outcome = await this.#watch(this.#resourceVersion);
        if (outcome.expired) {
          this.#log.info({ resourceVersion: this.#resourceVersion }, "watch expired (410); listing again");
          this.#resourceVersion = "";
          listReason = "expired";
          delay = expiredInARow++ > 0 ? this.#backoff.next() : 0;
        } else {
          expiredInARow = 0;
          if (outcome.healthy) this.#backoff.reset();
          else delay = this.#backoff.next();
        }
      } catch (err) {
        if (this.#stop.signal.aborted) break;
        if (err instanceof ApiStatusError && err.expired) {
          this.#log.info({ err: err.message }, "resourceVersion expired (410); listing again");
          this.#resourceVersion = "";
          listReason = "expired";
          delay = expiredInARow++ > 0 ? this.#backoff.next() : 0;
        } else {
          delay = this.#backoff.next();
          if (err instanceof ApiStatusError && err.tooLargeResourceVersion) {
            this.#resourceVersion = "";
            listReason = "too_large_rv";
          }
          const reason =
            err instanceof InactivityError
              ? "inactive"
              : err instanceof ReadLimitError
                ? err.reason
                : err instanceof ApiStatusError
                  ? "http"
                  : err instanceof SyntaxError
                    ? "decode"
                    : "network";
          this.#countError(reason, err, delay);
        }
      }
      if (delay > 0) await sleep(delay, this.#stop.signal);
    }
  }

  #countError(reason: string, err: unknown, retryInMs: number): void {
    reflectorErrorsTotal.inc({ resource: this.#spec.resource, reason });
    this.#log.warn(
      { reason, err: err instanceof Error ? err.message : String(err), retryInMs },
      "list/watch failed",
    );
  }

  /**
   * Sends a GET and returns the response once its status is 200, with `touch` to re-arm the
   * inactivity timer on each chunk, `explain` to turn an inactivity abort into an InactivityError,
   * and `done` to call when finished with the body.
   */
  async #open(query: URLSearchParams, deadlineMs?: number): Promise<OpenRequest> {
    const controller = new AbortController();
    const onStop = () => controller.abort();
    this.#stop.signal.addEventListener("abort", onStop, { once: true });
    // Bytes that trickle in keep the inactivity timer happy; the deadline bounds the whole request.
    // Data that came while kpng's thread was busy is read before either counts as passed.
    const deadline =
      deadlineMs === undefined
        ? undefined
        : answerDeadline(deadlineMs, () =>
            controller.abort(
              new ReadLimitError("deadline", `the request did not complete within ${deadlineMs} ms`),
            ),
          );
    let inactivity: AnswerDeadline | undefined;
    const inactivityMs = this.#timings.inactivityTimeoutMs;
    const request: Omit<OpenRequest, "res"> = {
      touch: () => {
        inactivity?.clear();
        inactivity = answerDeadline(inactivityMs, () =>
          controller.abort(new InactivityError(`no data for ${inactivityMs} ms`)),
        );
      },
      explain: (err) => {
        const reason: unknown = controller.signal.reason;
        return (reason instanceof InactivityError || reason instanceof ReadLimitError) &&
          !this.#stop.signal.aborted
          ? reason
          : err;
      },
      done: () => {
        inactivity?.clear();
        deadline?.clear();
        this.#stop.signal.removeEventListener("abort", onStop);
        controller.abort();
      },
    };
    request.touch();
    try {
      const res = await this.#transport.get(`${this.#spec.path}?${query}`, controller.signal);
      request.touch();
      if (res.statusCode !== 200) throw await readStatus(res);
      return { ...request, res };
    } catch (err) {
      const explained = request.explain(err);
      request.done();
      throw explained;
    }
  }

  #selectorQuery(): URLSearchParams {
    const query = new URLSearchParams();
    if (this.#spec.labelSelector) query.set("labelSelector", this.#spec.labelSelector);
    if (this.#spec.fieldSelector) query.set("fieldSelector", this.#spec.fieldSelector);
    return query;
  }

  async #readJson(query: URLSearchParams): Promise<unknown> {
    const { res, touch, explain, done } = await this.#open(query, this.#timings.listTimeoutMs);
    const chunks: Buffer[] = [];
    const maxBytes = this.#timings.maxListBytes;
    let bytes = 0;
    try {
      for await (const chunk of res) {
        touch();
        bytes += chunk.length;
        if (bytes > maxBytes)
          throw new ReadLimitError("too_large", `a list response exceeds ${maxBytes} bytes`);
        chunks.push(chunk);
      }
    } catch (err) {
      throw explain(err);
    } finally {
      done();
    }
    return parseListBody(Buffer.concat(chunks));
  }

  /**
   * Lists every page into one consistent snapshot, each page handed to the sink as it arrives,
   * then replaces the kind in the sink; returns the list's resourceVersion.
   */
  async #list(reason: string): Promise<string> {
    relistsTotal.inc({ resource: this.#spec.resource, reason });
    let restarts = 0;
    for (;;) {
      const limit = restarts >= this.#timings.maxContinueRestarts ? 0 : this.#timings.pageSize;
      // Each page is parsed and handed on as it arrives, so neither a page's raw objects nor
      // the list's parsed ones are gathered here (50k raw pods are hundreds of MiB).
      const known = new Map<string, T>();
      const writer = this.#sink.startList?.(this.#spec.kind) ?? gatheringList(this.#sink, this.#spec.kind);
      let resourceVersion = "";
      let token = "";
      try {
        do {
          const query = this.#selectorQuery();
          if (limit > 0) query.set("limit", String(limit));
          if (token !== "") query.set("continue", token);
          const page = (await this.#readJson(query)) as {
            metadata?: { resourceVersion?: unknown; continue?: unknown };
            items?: unknown;
          };
          markActivity(this.#spec.resource);
          if (!Array.isArray(page.items)) throw new Error("list response has no items array");
          const objects = this.#parsePage(page.items, known);
          this.#deliver(() => writer.add(objects));
          resourceVersion = String(page.metadata?.resourceVersion ?? "");
          token = typeof page.metadata?.continue === "string" ? page.metadata.continue : "";
        } while (token !== "");
      } catch (err) {
        // A continue token outlived the server's history: the pages no longer form one snapshot.
        if (err instanceof ApiStatusError && err.expired && token !== "") {
          restarts++;
          relistsTotal.inc({ resource: this.#spec.resource, reason: "continue_expired" });
          this.#log.info({ restarts }, "continue token expired (410); restarting the list");
          continue;
        }
        throw err;
      }
      if (resourceVersion === "") throw new Error("list response has no metadata.resourceVersion");
      this.#known = known;
      this.#delivered = true;
      this.#deliver(() => writer.commit());
      this.#log.info({ objects: known.size, resourceVersion, reason }, "listed");
      return resourceVersion;
    }
  }

  /**
   * A page's valid objects, also recorded in `known`. An invalid one is skipped (logged and
   * counted); its last valid copy, if any, is kept in its place.
   */
  #parsePage(items: readonly unknown[], known: Map<string, T>): T[] {
    const objects: T[] = [];
    for (const raw of items) {
      const result = this.#spec.parse(raw);
      if (result.ok) {
        known.set(objectKey(result.value.metadata), result.value);
        objects.push(result.value);
        continue;
      }
      reportInvalidObject(this.#log, "kube", result);
      const previous = this.#known.get(result.name);
      if (previous) {
        known.set(result.name, previous);
        objects.push(previous);
      }
    }
    return objects;
  }

  /** Sink exceptions are bugs elsewhere; they must not stop the stream for everything else. */
  #deliver(action: () => void): void {
    try {
      action();
    } catch (err) {
      reflectorErrorsTotal.inc({ resource: this.#spec.resource, reason: "handler" });
      this.#log.error({ err: err instanceof Error ? err.stack : String(err) }, "sink failed on an event");
    }
  }

  async #watch(fromVersion: string): Promise<WatchOutcome> {
    const query = this.#selectorQuery();
    query.set("watch", "1");
    query.set("resourceVersion", fromVersion);
    query.set("allowWatchBookmarks", "true");
    const min = this.#timings.minWatchTimeoutSeconds;
    query.set("timeoutSeconds", String(Math.floor(min * (1 + this.#random()))));

    const startedAt = Date.now();
    const { res, touch, explain, done } = await this.#open(query);
    const splitter = new JsonLineSplitter(this.#timings.maxLineBytes);
    let sawEvent = false;
    let ending: "expired" | "error" | undefined;
    const handle = (line: string): void => {
      const event = this.#parseLine(line);
      if (!event) return;
      const outcome = this.#handleEvent(event);
      if (outcome === "expired" || outcome === "error") {
        ending = outcome;
        return;
      }
      sawEvent = true;
      // Kept as we go, so a watch that breaks later still resumes from here.
      if (outcome !== undefined) this.#resourceVersion = outcome;
    };
    try {
      read: for await (const chunk of res) {
        touch();
        for (const line of splitter.push(chunk)) {
          handle(line);
          if (ending) break read;
        }
      }
      if (!ending) for (const line of splitter.end()) handle(line);
    } catch (err) {
      throw explain(err);
    } finally {
      done();
    }
    const healthy =
      sawEvent || (ending === undefined && Date.now() - startedAt >= this.#timings.minHealthyWatchMs);
    return { expired: ending === "expired", healthy };
  }

  #parseLine(line: string): RawEvent | undefined {
    try {
      const event = JSON.parse(line) as RawEvent;
      if (typeof event === "object" && event !== null && typeof event.type === "string") return event;
      throw new Error("not a watch event");
    } catch (err) {
      reflectorErrorsTotal.inc({ resource: this.#spec.resource, reason: "decode" });
      this.#log.warn(
        { line: line.slice(0, 200), err: (err as Error).message },
        "skipping undecodable watch line",
      );
      return undefined;
    }
  }

  /** Applies one event; returns the new resourceVersion, "expired", "error", or undefined. */
  #handleEvent(event: RawEvent): string | "expired" | "error" | undefined {
    const type = String(event.type);
    watchEventsTotal.inc({ resource: this.#spec.resource, type });
    markActivity(this.#spec.resource);
    const object = event.object ?? {};
    if (type === "ERROR") {
      if (object.code === 410) return "expired";
      reflectorErrorsTotal.inc({ resource: this.#spec.resource, reason: "http" });
      this.#log.warn({ status: object }, "watch ERROR event; reconnecting");
      return "error";
    }
    this.#log.trace({ type }, "watch event");
    const rv = object.metadata?.resourceVersion;
    const resourceVersion = typeof rv === "string" && rv !== "" ? rv : undefined;
    switch (type) {
      case "BOOKMARK":
        return resourceVersion;
      case "ADDED":
      case "MODIFIED": {
        const result = this.#spec.parse(object);
        if (result.ok) {
          this.#known.set(objectKey(result.value.metadata), result.value);
          this.#deliver(() => this.#sink.upsert(result.value));
        } else {
          // Keep serving the last valid copy (if any): a bad update must not take a service down.
          reportInvalidObject(this.#log, "kube", result);
        }
        return resourceVersion;
      }
      case "DELETED": {
        const key = this.#rawKey(object.metadata);
        if (key !== undefined) {
          this.#known.delete(key);
          this.#deliver(() => this.#sink.delete(this.#spec.kind, key));
        }
        return resourceVersion;
      }
      default:
        this.#log.warn({ type }, "unknown watch event type");
        return resourceVersion;
    }
  }

  #rawKey(meta: { name?: unknown; namespace?: unknown } | undefined): string | undefined {
    if (typeof meta?.name !== "string") return undefined;
    const namespace =
      this.#spec.clusterScoped || this.#spec.kind === "Node"
        ? ""
        : typeof meta.namespace === "string"
          ? meta.namespace
          : "";
    return objectKey({ namespace, name: meta.name });
  }
}
