// The kube source: one reflector per resource (Services, EndpointSlices, this node's Node) into
// the sink, and `synced()` once every one of them has completed its first list — an empty cluster
// included — so the brain never computes from a partial picture.

import type { ClusterSink, ClusterSource } from "../../model/global.ts";
import { parseEndpointSlice, parseNode, parseService } from "../../model/validate.ts";
import type { Logger } from "../../observability/log.ts";
import { Reflector, type ReflectorTimings, type ResourceSpec } from "./reflector.ts";
import { endpointSliceLabelSelector, nodeFieldSelector, serviceLabelSelector } from "./selectors.ts";
import type { KubeTransport } from "./transport.ts";

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

export interface KubeSourceOptions extends WatchScope {
  readonly transport: KubeTransport;
  readonly log: Logger;
  readonly timings?: Partial<ReflectorTimings>;
  readonly random?: () => number;
}

export class KubeSource implements ClusterSource {
  readonly #options: KubeSourceOptions;
  #reflectors: Reflector[] = [];

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
    void Promise.all(reflectors.map((r) => r.listed)).then(() => {
      if (this.#reflectors !== reflectors) return;
      log.info("every resource listed; synced");
      sink.synced();
    });
  }

  async stop(): Promise<void> {
    const reflectors = this.#reflectors;
    this.#reflectors = [];
    await Promise.all(reflectors.map((r) => r.stop()));
  }
}
