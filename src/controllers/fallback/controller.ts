// The fallback controller: watches Services, Pods, Nodes and EndpointSlices (with the kube
// source's reflector), and for each Service annotated with a fallback selector keeps its fallback
// EndpointSlices and their active label. Only the leader writes; every replica keeps its caches
// warm so a new leader acts at once.

import { ApiStatusError, Reflector, type ReflectorTimings } from "../../kube/reflector.ts";
import type { KubeRequester } from "../../kube/request.ts";
import type { KubeTransport } from "../../kube/transport.ts";
import { type Clock, systemClock } from "../../model/clock.ts";
import {
  isActiveFallbackSlice,
  isFallbackSlice as isFallback,
  primaryHasReady,
  primaryHasServing,
} from "../../model/fallback.ts";
import { type FallbackSpec, readFallbackSpec } from "../../model/fallback-spec.ts";
import { familyOfAddress } from "../../model/ip.ts";
import {
  type EndpointSlice,
  LABEL_ZONE,
  type Node,
  objectKey,
  type Service,
  sliceServiceKey,
} from "../../model/kube.ts";
import type { LabelSelector } from "../../model/label-selector.ts";
import { parseEndpointSlice, parseNode, parseService } from "../../model/validate.ts";
import type { Logger } from "../../observability/log.ts";
import { type ActivationState, INACTIVE, step } from "./activation.ts";
import { ObjectCache } from "./cache.ts";
import { type EventReason, recordEvent, serviceEvent } from "./events.ts";
import {
  fallbackActive,
  fallbackInvalidServicesTotal,
  fallbackSwitchesTotal,
  fallbackWriteErrorsTotal,
  fallbackWritesTotal,
} from "./metrics.ts";
import { planWrites, type SliceWrite } from "./plan.ts";
import { type Pod, parsePod } from "./pod.ts";
import { PodIndex } from "./pod-index.ts";
import { resolvePorts } from "./ports.ts";
import { buildFallbackSlices, servesAsFallback, serviceFamilies, toApiObject } from "./slices.ts";

export interface FallbackControllerOptions {
  readonly transport: KubeTransport;
  readonly requester: KubeRequester;
  readonly log: Logger;
  readonly clock?: Clock;
  readonly timings?: Partial<ReflectorTimings>;
  /** First retry after a failed write or event; doubles per failure of the same Service up to 30 s. */
  readonly retryDelayMs?: number;
  /** First retry after a 409 Conflict; doubles per failure up to 30 s. */
  readonly conflictRetryDelayMs?: number;
}

const MAX_RETRY_DELAY_MS = 30_000;
/** Services reconciled at once: hides API round trips; each Service is still done in order. */
const WORKERS = 8;
/** A conflict means our cache is behind; the watch brings the newer object within moments. */
const CONFLICT_RETRY_DELAY_MS = 100;
/** Tries per Event: an Event is for people, but one that says traffic moved must not be lost to a blip. */
const EVENT_ATTEMPTS = 5;

interface PendingEvent {
  readonly type: "Normal" | "Warning";
  readonly reason: EventReason;
  readonly message: string;
}

/** Why a Service gets no fallback slices whatever its annotations say, or undefined. */
function unsupported(service: Service): string | undefined {
  if (service.type === "ExternalName") return "an ExternalName Service has no endpoints to fall back from";
  if (service.clusterIP === "None")
    return "a headless Service publishes its endpoints in DNS: a fallback would publish the fallback pods";
  return undefined;
}

export function backoffMs(baseMs: number, failures: number): number {
  return Math.min(MAX_RETRY_DELAY_MS, baseMs * 2 ** Math.min(30, Math.max(0, failures - 1)));
}

export class FallbackController {
  readonly #options: FallbackControllerOptions;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #services = new ObjectCache<Service>((before, after) => {
    this.#saw(after);
    this.#serviceChanged(before, after);
  });
  readonly #pods = new ObjectCache<Pod>((before, after) => {
    this.#saw(after);
    this.#podChanged(before, after);
  });
  readonly #podIndex = new PodIndex();
  readonly #nodes = new ObjectCache<Node>((before, after) => this.#nodeChanged(before, after));
  readonly #slices = new ObjectCache<EndpointSlice>((before, after) => {
    this.#saw(after);
    this.#sliceChanged(before, after);
  });
  #seenVersion = 0;
  /** service key → its slices by slice name. */
  readonly #slicesByService = new Map<string, Map<string, EndpointSlice>>();
  /** namespace → keys of its Services that carry a fallback selector annotation. */
  readonly #annotated = new Map<string, Set<string>>();
  readonly #specs = new WeakMap<Service, FallbackSpec>();
  readonly #states = new Map<string, ActivationState>();
  readonly #warned = new Map<string, string>();
  readonly #rechecks = new Map<string, () => void>();
  readonly #failures = new Map<string, number>();
  /** Switch Events decided but not yet sent: they go once the slices that made the switch are written. */
  readonly #pendingEvents = new Map<string, PendingEvent>();
  /** Aborted when leadership is lost: writes of a former leader must not land. */
  #term = new AbortController();
  readonly #dirty = new Set<string>();
  /** service key → the pods its fallback selector matches; dropped when one of them changes. */
  readonly #matched = new Map<string, Pod[]>();
  /** Events being sent: they do not hold back the next reconcile, but stop() waits for them. */
  readonly #sending = new Set<Promise<void>>();
  /** Keys being reconciled: one Service is never reconciled twice at once. */
  readonly #inFlight = new Set<string>();
  #workers = 0;
  #reflectors: { stop(): Promise<void> }[] = [];
  #synced = false;
  #leading = false;
  #stopped = false;
  /** Resolves once every resource has been listed. */
  readonly synced: Promise<void>;
  #markSynced!: () => void;

  constructor(options: FallbackControllerOptions) {
    this.#options = options;
    this.#log = options.log;
    this.#clock = options.clock ?? systemClock;
    this.synced = new Promise((resolve) => {
      this.#markSynced = resolve;
    });
  }

  start(): void {
    const { transport, log, timings } = this.#options;
    const options = { transport, log, ...(timings && { timings }) };
    const reflectors = [
      new Reflector(
        { kind: "Service", resource: "services", path: "/api/v1/services", parse: parseService },
        this.#services,
        options,
      ),
      new Reflector(
        { kind: "Pod", resource: "pods", path: "/api/v1/pods", parse: parsePod },
        this.#pods,
        options,
      ),
      new Reflector(
        {
          kind: "Node",
          resource: "nodes",
          path: "/api/v1/nodes",
          clusterScoped: true,
          parse: (raw) => parseNode(raw),
        },
        this.#nodes,
        options,
      ),
      new Reflector(
        {
          kind: "EndpointSlice",
          resource: "endpointslices",
          path: "/apis/discovery.k8s.io/v1/endpointslices",
          parse: (raw) => parseEndpointSlice(raw),
        },
        this.#slices,
        options,
      ),
    ];
    this.#reflectors = reflectors;
    for (const r of reflectors) r.start();
    void Promise.all(reflectors.map((r) => r.listed)).then(() => {
      if (this.#stopped) return;
      this.#synced = true;
      this.#log.info({ services: this.#services.size, pods: this.#pods.size }, "every resource listed");
      this.#markSynced();
      this.#enqueueAll();
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#term.abort();
    for (const cancel of this.#rechecks.values()) cancel();
    this.#rechecks.clear();
    await Promise.all(this.#reflectors.map((r) => r.stop()));
    await this.idle();
  }

  /**
   * Only the leader writes. A replica that stops leading aborts the writes it has in flight; one
   * that leads (again) forgets what it knew as a leader and starts from the API's objects (its
   * caches are the watch's, always current), then reconciles every annotated Service.
   */
  setLeading(leading: boolean): void {
    if (leading === this.#leading) return;
    this.#leading = leading;
    this.#term.abort();
    this.#term = new AbortController();
    for (const cancel of this.#rechecks.values()) cancel();
    this.#rechecks.clear();
    this.#states.clear();
    this.#failures.clear();
    this.#warned.clear();
    this.#pendingEvents.clear();
    if (leading) this.#enqueueAll();
  }

  /** Resolves when no reconcile or event is queued or running (tests and benchmarks wait on it). */
  async idle(): Promise<void> {
    while (this.#workers > 0 || this.#sending.size > 0)
      await new Promise((resolve) => setTimeout(resolve, 5));
  }

  /**
   * The newest resourceVersion of a Service, Pod or EndpointSlice that reached the caches: a
   * change written at or below it has been routed (tests wait on it before asserting no effect).
   */
  get seenVersion(): number {
    return this.#seenVersion;
  }

  #saw(object: { readonly metadata: { readonly resourceVersion: string } } | undefined): void {
    this.#seenVersion = Math.max(this.#seenVersion, Number(object?.metadata.resourceVersion) || 0);
  }

  // ── change routing ─────────────────────────────────────────────────────────────────────────

  #serviceChanged(before: Service | undefined, after: Service | undefined): void {
    const service = (after ?? before)!;
    const key = objectKey(service.metadata);
    const ns = service.metadata.namespace;
    if (after !== undefined && readFallbackSpec(after.metadata.annotations).kind !== "none") {
      let set = this.#annotated.get(ns);
      if (set === undefined) {
        set = new Set();
        this.#annotated.set(ns, set);
      }
      set.add(key);
    } else {
      this.#annotated.get(ns)?.delete(key);
    }
    this.#matched.delete(key);
    this.#enqueue(key);
  }

  #podChanged(before: Pod | undefined, after: Pod | undefined): void {
    this.#podIndex.update(before, after);
    // Before every resource is listed nothing is reconciled or cached: no routing to do (and
    // 50k listed pods × 2,000 Services would be 100M selector matches for nothing).
    if (!this.#synced) return;
    const ns = (after ?? before)!.metadata.namespace;
    for (const key of this.#annotated.get(ns) ?? []) {
      const service = this.#services.get(key);
      const spec = service && this.#spec(service);
      if (spec?.kind !== "valid") continue;
      if (
        (before && spec.selector.matches(before.metadata.labels)) ||
        (after && spec.selector.matches(after.metadata.labels))
      ) {
        this.#matched.delete(key);
        this.#enqueue(key);
      }
    }
  }

  #nodeChanged(before: Node | undefined, after: Node | undefined): void {
    if (before?.metadata.labels[LABEL_ZONE] === after?.metadata.labels[LABEL_ZONE]) return;
    this.#enqueueAll();
  }

  #sliceChanged(before: EndpointSlice | undefined, after: EndpointSlice | undefined): void {
    for (const slice of [before, after]) {
      if (slice === undefined || slice.serviceName === "") continue;
      const key = sliceServiceKey(slice);
      let group = this.#slicesByService.get(key);
      if (slice === before) group?.delete(slice.metadata.name);
      else {
        if (group === undefined) {
          group = new Map();
          this.#slicesByService.set(key, group);
        }
        group.set(slice.metadata.name, slice);
      }
      if (group?.size === 0) this.#slicesByService.delete(key);
      this.#enqueue(key);
    }
  }

  #spec(service: Service): FallbackSpec {
    let spec = this.#specs.get(service);
    if (spec === undefined) {
      spec = readFallbackSpec(service.metadata.annotations);
      this.#specs.set(service, spec);
    }
    return spec;
  }

  // ── work queue ─────────────────────────────────────────────────────────────────────────────

  #enqueueAll(): void {
    for (const keys of this.#annotated.values()) for (const key of keys) this.#enqueue(key);
    for (const [key, group] of this.#slicesByService) {
      for (const slice of group.values()) if (isFallback(slice)) this.#enqueue(key);
    }
  }

  #enqueue(key: string): void {
    if (!this.#synced || !this.#leading || this.#stopped) return;
    this.#dirty.add(key);
    while (this.#workers < WORKERS && this.#workers < this.#dirty.size) {
      this.#workers++;
      void this.#work().finally(() => {
        this.#workers--;
      });
    }
  }

  #nextKey(): string | undefined {
    for (const key of this.#dirty) {
      if (this.#inFlight.has(key)) continue;
      this.#dirty.delete(key);
      return key;
    }
    return undefined;
  }

  /** One worker: reconciles keys until none is left that another worker is not already on. */
  async #work(): Promise<void> {
    // Let a burst of watch events land before the first reconcile.
    await new Promise((resolve) => setImmediate(resolve));
    for (;;) {
      if (!this.#leading || this.#stopped) return;
      const key = this.#nextKey();
      if (key === undefined) return;
      this.#inFlight.add(key);
      try {
        await this.#reconcile(key);
      } catch (err) {
        this.#log.error(
          { service: key, err: err instanceof Error ? err.stack : String(err) },
          "reconcile failed",
        );
        this.#retry(key, this.#options.retryDelayMs ?? 1000);
      } finally {
        this.#inFlight.delete(key);
      }
      // A key that changed while it was in flight is dirty again; pick it up.
    }
  }

  #retry(key: string, delayMs: number): void {
    this.#rechecks.get(key)?.();
    this.#rechecks.set(
      key,
      this.#clock.after(delayMs, () => {
        this.#rechecks.delete(key);
        this.#enqueue(key);
      }),
    );
  }

  // ── reconcile ──────────────────────────────────────────────────────────────────────────────

  async #reconcile(key: string): Promise<void> {
    const service = this.#services.get(key);
    const slices = [...(this.#slicesByService.get(key)?.values() ?? [])];
    const existing = slices.filter(isFallback);
    const spec = service === undefined ? ({ kind: "none" } as const) : this.#spec(service);
    const problem =
      service === undefined || spec.kind === "none"
        ? undefined
        : (unsupported(service) ?? (spec.kind === "invalid" ? spec.reason : undefined));
    if (problem !== undefined) {
      // As if the annotation were removed: the fallback ends, and people are told why.
      this.#warnInvalid(service!, key, problem);
      await this.#end(key, service, existing);
      return;
    }
    this.#warned.delete(key);
    if (spec.kind !== "valid" || service === undefined) {
      await this.#end(key, service, existing);
      return;
    }
    const now = this.#clock.now();
    const pods = this.#matchingPods(key, service, spec.selector);
    const families = serviceFamilies(service);
    const fallbackReady = pods.some(
      (p) =>
        servesAsFallback(p, service) &&
        p.ips.some((ip) => families.includes(familyOfAddress(ip)!)) &&
        resolvePorts(service.ports, p.ports).length > 0,
    );
    const state =
      this.#states.get(key) ??
      (existing.some(isActiveFallbackSlice) ? { active: true, primaryReadySince: undefined } : INACTIVE);
    const next = step(state, {
      primaryReady: primaryHasReady(slices),
      primaryServing: primaryHasServing(slices),
      fallbackReady,
      now,
      returnDelayMs: spec.returnDelayMs,
    });
    this.#states.set(key, next.state);
    fallbackActive.set(
      { namespace: service.metadata.namespace, service: service.metadata.name },
      next.state.active ? 1 : 0,
    );
    if (next.recheckAt !== undefined) this.#retry(key, Math.max(0, next.recheckAt - now));
    if (next.switched !== undefined) {
      fallbackSwitchesTotal.inc({ direction: next.switched });
      this.#log.info({ service: key, switched: next.switched }, "fallback switched");
      const activated = next.switched === "activated";
      // Replaces an unsent one: only the last switch is still true.
      this.#pendingEvents.set(key, {
        type: "Normal",
        reason: activated ? "FallbackActivated" : "FallbackDeactivated",
        message: activated
          ? "no ready endpoint of its own: traffic goes to the fallback pods"
          : `ready for ${spec.returnDelayMs} ms: traffic returns to the Service's own pods`,
      });
    }
    const desired = buildFallbackSlices({
      service,
      pods,
      zoneOf: (name) => this.#nodes.get(name)?.metadata.labels[LABEL_ZONE] ?? "",
      active: next.state.active,
    });
    if (await this.#write(key, service, planWrites(existing, desired))) this.#flushEvent(key, service);
  }

  /** The fallback is over for this Service: its slices go, and a switch back is counted. */
  async #end(key: string, service: Service | undefined, existing: readonly EndpointSlice[]): Promise<void> {
    const wasActive = this.#states.get(key)?.active ?? existing.some(isActiveFallbackSlice);
    this.#forget(key);
    if (wasActive && service !== undefined) {
      fallbackSwitchesTotal.inc({ direction: "deactivated" });
      this.#pendingEvents.set(key, {
        type: "Normal",
        reason: "FallbackDeactivated",
        message:
          "the fallback annotation was removed or is unusable: traffic returns to the Service's own pods",
      });
    }
    if (await this.#write(key, service, planWrites(existing, []))) {
      if (service !== undefined) this.#flushEvent(key, service);
      else this.#pendingEvents.delete(key);
    }
  }

  #flushEvent(key: string, service: Service): void {
    const event = this.#pendingEvents.get(key);
    if (event === undefined) return;
    this.#pendingEvents.delete(key);
    this.#sendEvent(service, event.type, event.reason, event.message);
  }

  #matchingPods(key: string, service: Service, selector: LabelSelector): Pod[] {
    const cached = this.#matched.get(key);
    if (cached !== undefined) return cached;
    const out = this.#podIndex.matching(service.metadata.namespace, selector);
    this.#matched.set(key, out);
    return out;
  }

  #sendEvent(service: Service, type: "Normal" | "Warning", reason: EventReason, message: string): void {
    const sending = this.#event(service, type, reason, message).finally(() => this.#sending.delete(sending));
    this.#sending.add(sending);
  }

  #forget(key: string): void {
    this.#states.delete(key);
    this.#matched.delete(key);
    const [namespace, service] = key.split("/") as [string, string];
    fallbackActive.remove({ namespace, service });
  }

  #warnInvalid(service: Service, key: string, reason: string): void {
    if (this.#warned.get(key) === reason) return;
    this.#warned.set(key, reason);
    fallbackInvalidServicesTotal.inc();
    this.#log.warn({ service: key, reason }, "no fallback for this Service; its fallback slices are removed");
    this.#sendEvent(service, "Warning", "InvalidFallback", reason);
  }

  /** Never throws; tries EVENT_ATTEMPTS times with backoff, without holding back the slices. */
  async #event(
    service: Service,
    type: "Normal" | "Warning",
    reason: EventReason,
    message: string,
  ): Promise<void> {
    const event = serviceEvent(service, type, reason, message, new Date());
    const signal = this.#term.signal;
    for (let attempt = 1; ; attempt++) {
      try {
        await recordEvent(this.#options.requester, event, service.metadata.namespace, signal);
        return;
      } catch (err) {
        // Stopped or no longer leading: the next leader tells its own story.
        if (signal.aborted || this.#stopped) return;
        fallbackWriteErrorsTotal.inc({ verb: "event", reason: reasonOf(err) });
        const last = attempt >= EVENT_ATTEMPTS;
        this.#log.warn(
          { service: objectKey(service.metadata), reason, attempt, err: String(err) },
          last ? "could not record an event; giving up" : "could not record an event; retrying",
        );
        if (last) return;
        await new Promise<void>((resolve) =>
          this.#clock.after(backoffMs(this.#options.retryDelayMs ?? 1000, attempt), resolve),
        );
      }
    }
  }

  /** Applies the writes in order; on the first failure, retries the whole Service later. */
  async #write(key: string, service: Service | undefined, writes: readonly SliceWrite[]): Promise<boolean> {
    const [namespace] = key.split("/") as [string];
    const signal = this.#term.signal;
    const base = `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices`;
    for (const w of writes) {
      try {
        if (w.verb === "create") {
          await this.#options.requester.send({
            method: "POST",
            path: base,
            body: toApiObject(w.spec, service!),
            signal,
          });
        } else if (w.verb === "update") {
          await this.#options.requester.send({
            method: "PUT",
            path: `${base}/${w.spec.name}`,
            body: toApiObject(w.spec, service!, w.resourceVersion),
            signal,
          });
        } else {
          await this.#options.requester.send({
            method: "DELETE",
            path: `${base}/${w.name}`,
            body: { preconditions: { resourceVersion: w.resourceVersion } },
            signal,
          });
        }
        fallbackWritesTotal.inc({ verb: w.verb });
      } catch (err) {
        // Leadership was lost (or the controller stops): the new leader takes it from here.
        if (signal.aborted) return false;
        const reason = reasonOf(err);
        fallbackWriteErrorsTotal.inc({ verb: w.verb, reason });
        if (w.verb === "delete" && err instanceof ApiStatusError && err.status === 404) continue;
        const failures = (this.#failures.get(key) ?? 0) + 1;
        this.#failures.set(key, failures);
        const delay = backoffMs(
          reason === "conflict" || reason === "exists"
            ? (this.#options.conflictRetryDelayMs ?? CONFLICT_RETRY_DELAY_MS)
            : (this.#options.retryDelayMs ?? 1000),
          failures,
        );
        this.#log.warn(
          { service: key, verb: w.verb, reason, err: String(err), retryInMs: delay },
          "write failed",
        );
        this.#retry(key, delay);
        return false;
      }
    }
    this.#failures.delete(key);
    return true;
  }
}

function reasonOf(err: unknown): string {
  if (!(err instanceof ApiStatusError)) return "network";
  if (err.status === 409) return err.reason === "AlreadyExists" ? "exists" : "conflict";
  return "http";
}
