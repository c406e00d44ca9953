// The kube source: one reflector per resource (Services, EndpointSlices, this node's Node, and the
// ServiceCIDRs when the cluster serves them) into the sink, and `synced()` once every one of them
// has completed its first list — an empty cluster included — so the brain never computes from a
// partial picture.

import {
  DEFAULT_TIMINGS,
  Reflector,
  type ReflectorTimings,
  type ResourceSpec,
} from "../../kube/reflector.ts";
import type { KubeTransport } from "../../kube/transport.ts";
import { type Clock, systemClock } from "../../model/clock.ts";
import type { ClusterSink, ClusterSource } from "../../model/global.ts";
import { parseEndpointSlice, parseNode, parseService, parseServiceCIDR } from "../../model/validate.ts";
import type { Logger } from "../../observability/log.ts";
import { endpointSliceLabelSelector, nodeFieldSelector, serviceLabelSelector } from "./selectors.ts";
import { findServiceCIDRPath } from "./service-cidr-api.ts";

export interface WatchScope {
  /** Set: watch only Services labelled with this proxy name. Unset: only unlabelled ones. */
  readonly serviceProxyName?: string | undefined;
  /** Set: watch only this Node. Unset: every Node (a brain serving many nodes). */
  readonly nodeName?: string | undefined;
}

export function resourceSpecs(scope: WatchScope): ResourceSpec[] {
  return [
    {
      kind: "Service",
      resource: "services",
      path: "/api/v1/services",
      labelSelector: serviceLabelSelector(scope.serviceProxyName),
      parse: (raw) => parseService(raw),
    },
    {
      kind: "EndpointSlice",
      resource: "endpointslices",
      path: "/apis/discovery.k8s.io/v1/endpointslices",
      labelSelector: endpointSliceLabelSelector(scope.serviceProxyName),
      parse: (raw) => parseEndpointSlice(raw),
    },
    {
      kind: "Node",
      resource: "nodes",
      path: "/api/v1/nodes",
      fieldSelector: nodeFieldSelector(scope.nodeName),
      parse: (raw) => parseNode(raw),
    },
  ];
}

/** ServiceCIDRs at `path` (v1 or v1beta1), with the same label selector as Services, as kube-proxy. */
export function serviceCIDRSpec(path: string, scope: WatchScope): ResourceSpec {
  return {
    kind: "ServiceCIDR",
    resource: "servicecidrs",
    path,
    labelSelector: serviceLabelSelector(scope.serviceProxyName),
    parse: (raw) => parseServiceCIDR(raw),
  };
}

export interface KubeSourceOptions extends WatchScope {
  /** Default true. False when the ranges are given (--service-cidrs): ServiceCIDRs are not read. */
  readonly watchServiceCIDRs?: boolean;
  readonly transport: KubeTransport;
  readonly log: Logger;
  readonly timings?: Partial<ReflectorTimings>;
  readonly random?: () => number;
  /**
   * Every this many ms, each resource's cached objects are handed to the sink again (kube-proxy's
   * configSyncPeriod); 0 or unset: never.
   */
  readonly resyncPeriodMs?: number;
  readonly clock?: Clock;
}

export class KubeSource implements ClusterSource {
  readonly #options: KubeSourceOptions;
  #reflectors: Reflector[] = [];
  #stopping = new AbortController();
  #cancelResync: (() => void) | undefined;

  constructor(options: KubeSourceOptions) {
    this.#options = options;
  }

  async start(sink: ClusterSink): Promise<void> {
    const { transport, log, timings, random } = this.#options;
    this.#reflectors = resourceSpecs(this.#options).map(
      (spec) =>
        new Reflector(spec, sink, { transport, log, ...(timings && { timings }), ...(random && { random }) }),
    );
    for (const reflector of this.#reflectors) reflector.start();
    const reflectors = this.#reflectors;
    this.#stopping = new AbortController();
    const rangesListed =
      this.#options.watchServiceCIDRs === false
        ? Promise.resolve()
        : this.#watchServiceCIDRs(sink, reflectors, this.#stopping.signal);
    void Promise.all([...reflectors.map((r) => r.listed), rangesListed]).then(() => {
      if (this.#reflectors !== reflectors) return;
      log.info("every resource listed; synced");
      sink.synced();
    });
    this.#scheduleResync(reflectors);
  }

  #scheduleResync(reflectors: readonly Reflector[]): void {
    const { resyncPeriodMs = 0, clock = systemClock } = this.#options;
    if (resyncPeriodMs <= 0) return;
    this.#cancelResync = clock.after(resyncPeriodMs, () => {
      if (this.#reflectors !== reflectors) return;
      for (const reflector of reflectors) reflector.resync();
      this.#scheduleResync(reflectors);
    });
  }

  /** Finds the served ServiceCIDR API, then lists and watches it like the other kinds. */
  async #watchServiceCIDRs(sink: ClusterSink, reflectors: Reflector[], signal: AbortSignal): Promise<void> {
    const { transport, log, timings, random } = this.#options;
    const path = await findServiceCIDRPath({
      transport,
      log,
      signal,
      timeoutMs: timings?.inactivityTimeoutMs ?? DEFAULT_TIMINGS.inactivityTimeoutMs,
      ...(timings?.backoff && { backoff: timings.backoff }),
    });
    if (path === undefined || signal.aborted || this.#reflectors !== reflectors) return;
    log.info({ path }, "watching ServiceCIDRs");
    const reflector = new Reflector(serviceCIDRSpec(path, this.#options), sink, {
      transport,
      log,
      ...(timings && { timings }),
      ...(random && { random }),
    });
    reflectors.push(reflector);
    reflector.start();
    await reflector.listed;
  }

  async stop(): Promise<void> {
    this.#cancelResync?.();
    this.#stopping.abort();
    const reflectors = this.#reflectors;
    this.#reflectors = [];
    await Promise.all(reflectors.map((r) => r.stop()));
  }
}
