// The handover of relabelled Services between backends that watch the brain over the API
// (`to-api --every-service-proxy-name`, `kpng local --api … --service-proxy-name X`): one
// ConfirmedHandover per node, between that node's backends, so that a Service moves from one
// name's backend to the other's on each node only once that node's gaining backend reports a
// sync holding it. A node's backends are the views its clients watch, for as long as the API
// keeps their state (a client reconnecting keeps its place).

import type { Clock } from "../model/clock.ts";
import type { ClusterView } from "../model/global.ts";
import type { IPFamily } from "../model/kube.ts";
import type { ServiceLookup } from "../model/local.ts";
import type { Logger } from "../observability/log.ts";
import type { RemoteBackends } from "../plugin/contracts.ts";
import { ConfirmedHandover, type Handover } from "./handover.ts";
import { proxyNameView } from "./proxy-name-view.ts";

interface RemoteHandoversOptions {
  /** Longest wait for a gaining backend that reports its syncs. */
  readonly fallbackMs: number;
  /** The wait for one that does not (a client that predates sync reports). */
  readonly unconfirmedMs: number;
  readonly log: Logger;
  readonly clock?: Clock;
}

interface NodeBackends {
  readonly handover: ConfirmedHandover;
  /** By service proxy name: whether the backend reports its syncs. */
  readonly reports: Map<string, boolean>;
  /** By service proxy name: the views following the store (a name may be asked for twice). */
  readonly views: Map<string, number>;
}

export class RemoteHandovers implements RemoteBackends {
  readonly #store: ClusterView;
  readonly #o: RemoteHandoversOptions;
  readonly #nodes = new Map<string, NodeBackends>();

  constructor(store: ClusterView, options: RemoteHandoversOptions) {
    this.#store = store;
    this.#o = options;
  }

  /** Nodes with a backend watching; each costs one small entry. */
  get nodeCount(): number {
    return this.#nodes.size;
  }

  view(serviceProxyName: string, nodeName: string): ClusterView {
    // The node's entry exists only while one of its views follows the store.
    const handover: Handover = {
      begin: (...args) => this.#node(nodeName).handover.begin(...args),
      cancel: (...args) => this.#nodes.get(nodeName)?.handover.cancel(...args),
    };
    return proxyNameView(this.#store, serviceProxyName, handover, (on) =>
      on ? this.#join(nodeName, serviceProxyName) : this.#leave(nodeName, serviceProxyName),
    );
  }

  reportsSyncs(nodeName: string, serviceProxyName: string): void {
    const node = this.#nodes.get(nodeName);
    if (node?.reports.has(serviceProxyName)) node.reports.set(serviceProxyName, true);
  }

  programmed(
    nodeName: string,
    serviceProxyName: string,
    services: ServiceLookup,
    families: readonly IPFamily[],
  ): void {
    this.reportsSyncs(nodeName, serviceProxyName);
    this.#nodes.get(nodeName)?.handover.programmed(serviceProxyName, services, families);
  }

  #node(nodeName: string): NodeBackends {
    let node = this.#nodes.get(nodeName);
    if (node === undefined) {
      const reports = new Map<string, boolean>();
      const handover = new ConfirmedHandover({
        backends: reports,
        fallbackMs: this.#o.fallbackMs,
        unconfirmedMs: this.#o.unconfirmedMs,
        log: this.#o.log.child({ node: nodeName }),
        clock: this.#o.clock,
      });
      node = { handover, reports, views: new Map() };
      this.#nodes.set(nodeName, node);
    }
    return node;
  }

  #join(nodeName: string, name: string): void {
    const node = this.#node(nodeName);
    node.views.set(name, (node.views.get(name) ?? 0) + 1);
    if (!node.reports.has(name)) node.reports.set(name, false);
  }

  #leave(nodeName: string, name: string): void {
    const node = this.#nodes.get(nodeName);
    if (node === undefined) return;
    const left = (node.views.get(name) ?? 1) - 1;
    if (left > 0) {
      node.views.set(name, left);
      return;
    }
    node.views.delete(name);
    node.reports.delete(name);
    // Handovers still pending end on their own timers.
    if (node.views.size === 0) this.#nodes.delete(nodeName);
  }
}
