// This node's LocalState over time: recompute only the services a ClusterChange names, keep the
// old object for every service whose result is structurally equal, and bump the revision only
// when something this node programs changed. Each revision shares every unchanged part of the
// previous services map and records the keys it changed, so a change costs O(changed).

import type { ClusterChange, ClusterView } from "../model/global.ts";
import { type EndpointSlice, LABEL_ZONE, type Node, type Service } from "../model/kube.ts";
import { type LocalService, type LocalState, NO_SERVICE_CIDRS, splitServiceCIDRs } from "../model/local.ts";
import { ServiceChangeLog } from "../model/local-changes.ts";
import { PersistentMap } from "../model/persistent-map.ts";
import { sameLocalService, sameStrings } from "./local-equal.ts";
import { computeLocalService, type NodeView } from "./local-service.ts";
import { type LocalServiceCache, localServiceCacheOf } from "./local-service-cache.ts";
import { nodePrimaryIPs } from "./node-ips.ts";
import { type SeedSource, type TrackerSeeds, trackerSeedsOf } from "./tracker-seeds.ts";

const NO_LABELS = Object.freeze({});

/** What a tracker reads of its Node object. */
interface NodeFacts {
  readonly view: NodeView;
  readonly eligible: boolean;
  readonly ips: readonly string[];
  readonly podCIDRs: readonly string[];
}

export interface LocalStateTrackerOptions {
  /**
   * The only node the store's brain serves (kpng on a node, with its backends in the process):
   * nothing is shared with other nodes, so the services are computed without the cache and the
   * seeds that the trackers of many nodes share (at 100k Services, a cache entry each and a look
   * through every endpoint for the node's name). Off for the watch API, which serves many nodes.
   */
  readonly alone?: boolean;
}

export class LocalStateTracker implements SeedSource {
  readonly #store: ClusterView;
  readonly #nodeName: string;
  /** Shared with the store's other trackers: nodes that look alike share results. None when alone. */
  readonly #computed: LocalServiceCache | undefined;
  /** Shared with the store's other trackers: a new node starts from a sibling's state. None when alone. */
  readonly #seeds: TrackerSeeds | undefined;
  #state: LocalState;
  /** The store's merged Service IP ranges that #state holds split by family. */
  #ranges: readonly string[] = [];
  #services: PersistentMap<LocalService> = PersistentMap.empty();
  readonly #changeLog = new ServiceChangeLog();
  /** This node's zone label as last computed with (undefined before the first): a change of it recomputes everything. */
  #zone: string | undefined;
  /** What was last read of this node's Node object; undefined before the first update. */
  #node: NodeFacts | undefined;

  constructor(store: ClusterView, nodeName: string, options: LocalStateTrackerOptions = {}) {
    this.#store = store;
    this.#nodeName = nodeName;
    this.#computed = options.alone === true ? undefined : localServiceCacheOf(store);
    this.#seeds = options.alone === true ? undefined : trackerSeedsOf(store);
    this.#state = {
      node: nodeName,
      revision: 0,
      services: this.#services,
      nodeEligible: false,
      nodeIPs: [],
      nodePodCIDRs: [],
      serviceCIDRs: NO_SERVICE_CIDRS,
      changeLog: this.#changeLog,
    };
  }

  get state(): LocalState {
    return this.#state;
  }

  get nodeName(): string {
    return this.#nodeName;
  }

  get zone(): string | undefined {
    return this.#zone;
  }

  get services(): PersistentMap<LocalService> {
    return this.#services;
  }

  /** The tracker no longer follows the store: other nodes must not start from its state. */
  retire(): void {
    this.#seeds?.forget(this);
  }

  /** Recomputes what changed for this node; returns the same LocalState object if nothing did. */
  update(change: ClusterChange): LocalState {
    // The Node is read again only when the change names it: an endpoint change reaches every
    // node's tracker, and reading the Node's facts each time was a cost per node per change.
    const facts =
      this.#node === undefined || change.nodes.has(this.#nodeName) ? this.#readNode() : this.#node;
    this.#node = facts;
    const { view: node, eligible: nodeEligible, ips: nodeIPs, podCIDRs: nodePodCIDRs } = facts;
    const zone = node.labels[LABEL_ZONE] ?? "";
    // A service's local state reads of the Node only its name and its zone: another change of
    // the Node (addresses, pod CIDRs, other labels, deletion) changes no service.
    const everything = this.#zone !== zone;
    this.#zone = zone;
    // A node with no state yet starts from a sibling's (see tracker-seeds.ts) when it can.
    const seed =
      everything && this.#services.size === 0 ? this.#seeds?.seedFor(this.#nodeName, zone) : undefined;
    const previous = this.#services;
    const changed = new Set<string>();
    if (everything && seed === undefined && previous.size === 0) this.#computeAll(node);
    else {
      const keys =
        seed !== undefined
          ? new Set([...seed.recompute, ...change.services])
          : everything
            ? this.#allKeys()
            : change.services;
      const editor = (seed?.services ?? this.#services).edit();
      for (const key of keys) {
        const before = editor.get(key);
        const service = this.#store.service(key);
        const after =
          service === undefined ? undefined : this.#compute(service, this.#store.slicesOf(key), node);
        if (after === undefined) {
          if (before === undefined) continue;
          editor.delete(key);
          changed.add(key);
        } else if (before === undefined || (before !== after && !sameLocalService(before, after))) {
          editor.set(key, after);
          changed.add(key);
        }
      }
      this.#services = editor.done();
    }
    if (everything) this.#seeds?.offer(this);
    // A state that starts from nothing changed every key: comparing finds them as fast as a
    // log would, so none is kept (10k keys per node held for nothing otherwise).
    const fromNothing = previous.size === 0 && this.#services.size > 0;
    const ranges = change.serviceCIDRs ? this.#store.serviceCIDRs() : this.#ranges;
    const rangesChanged = !sameStrings(ranges, this.#ranges);
    this.#ranges = ranges;
    if (changed.size > 0 || fromNothing || rangesChanged) {
      const revision = this.#state.revision + 1;
      if (!fromNothing) this.#changeLog.record(revision, changed);
      this.#state = {
        node: this.#nodeName,
        revision,
        services: this.#services,
        nodeEligible,
        nodeIPs,
        nodePodCIDRs,
        serviceCIDRs: rangesChanged ? splitServiceCIDRs(ranges) : this.#state.serviceCIDRs,
        changeLog: this.#changeLog,
      };
    } else if (
      nodeEligible !== this.#state.nodeEligible ||
      nodeIPs !== this.#state.nodeIPs ||
      nodePodCIDRs !== this.#state.nodePodCIDRs
    ) {
      // None changes a service (same revision), but /healthz needs eligibility and a backend
      // the node's IPs and pod CIDRs: a new state object.
      this.#state = { ...this.#state, nodeEligible, nodeIPs, nodePodCIDRs };
    }
    return this.#state;
  }

  /** The node's primary IPs; the last state's array while they are the same, so `!==` means changed. */
  #nodeIPs(node: Node | undefined): readonly string[] {
    const ips = nodePrimaryIPs(node);
    const last = this.#state.nodeIPs ?? [];
    return sameStrings(ips, last) ? last : ips;
  }

  /** The node's spec.podCIDRs; the last state's array while they are the same. */
  #nodePodCIDRs(node: Node | undefined): readonly string[] {
    const cidrs = node?.podCIDRs ?? [];
    const last = this.#state.nodePodCIDRs ?? [];
    return sameStrings(cidrs, last) ? last : cidrs;
  }

  /** What this tracker uses of its Node object, read from the store. */
  #readNode(): NodeFacts {
    const known = this.#store.node(this.#nodeName);
    return {
      view: { name: this.#nodeName, labels: known?.metadata.labels ?? NO_LABELS },
      eligible: known !== undefined && known.beingDeleted !== true,
      ips: this.#nodeIPs(known),
      podCIDRs: this.#nodePodCIDRs(known),
    };
  }

  /**
   * The first state (or one after the state emptied): every service in the store is new to it, so
   * nothing is looked up, compared or recorded per service.
   */
  #computeAll(node: NodeView): void {
    const keys: string[] = [];
    const services: LocalService[] = [];
    for (const key of this.#store.serviceKeys()) {
      const service = this.#store.service(key) as Service;
      const computed = this.#compute(service, this.#store.slicesOf(key), node);
      if (computed === undefined) continue;
      keys.push(key);
      services.push(computed);
    }
    this.#services = PersistentMap.fromColumns(keys, services);
  }

  #compute(service: Service, slices: readonly EndpointSlice[], node: NodeView): LocalService | undefined {
    return this.#computed === undefined
      ? computeLocalService(service, slices, node)
      : this.#computed.compute(service, slices, node);
  }

  /** Every service in the store, plus those in the state (which may have left the store). */
  #allKeys(): Set<string> {
    const keys = new Set(this.#state.services.keys());
    for (const key of this.#store.serviceKeys()) keys.add(key);
    return keys;
  }
}
