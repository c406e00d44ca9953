// One node's local states as the server serves them: the latest state with its wire revision,
// and a bounded log of what changed, so a stream (or a client resuming after a reconnect) that
// holds an older revision gets only the difference.
//
// Wire revisions come from one counter for the whole server, not from the brain's per-node
// LocalState.revision: a node whose tracker is dropped and created again starts its own count
// again, and a client's old revision must never be mistaken for the new tracker's.

import { isServiceProxyName } from "../brain/selection.ts";
import {
  allServiceCIDRs,
  type LocalService,
  type LocalState,
  type LocalStateFeed,
  type ServiceCIDRsByFamily,
  type ServiceLookup,
} from "../model/local.ts";
import { serviceChanges } from "../model/local-changes.ts";
import type { Frame } from "./frames.ts";
import { FullStateCache } from "./full-state-cache.ts";
import { GrpcStatus } from "./grpc-stream.ts";
import {
  type LocalDelta,
  localFullFrames,
  type NodeFacts,
  nodeFactsOf,
  sharedChangeFrames,
} from "./local-diff.ts";
import type { Revisioned } from "./revision-session.ts";
import { isValidNodeName, StreamRejection } from "./stream-rejection.ts";

interface NodeSnapshot {
  readonly revision: number;
  readonly state: LocalState;
}

interface LogEntry {
  /** The revision this entry leads from; entries are contiguous (each from = previous's to). */
  readonly from: number;
  /** The value each changed service had before this revision (undefined: it did not exist). */
  readonly previous: ReadonlyMap<string, LocalService | undefined>;
  /** The Service IP ranges before this revision. */
  readonly previousServiceCIDRs: ServiceCIDRsByFamily;
  /** The Node's facts before this revision. */
  readonly previousNode: NodeFacts | undefined;
}

export interface HubOptions {
  /** Most revisions kept per node for resume. */
  readonly maxLogRevisions?: number;
  /** Most service entries kept in one node's log, over all its revisions. */
  readonly maxLogEntries?: number;
  /** How long a node nobody watches is kept (for resume) before it is dropped. */
  readonly idleNodeMs?: number;
  /**
   * Most node states served at once. Each costs a brain computation on every change and the
   * memory of one local state; at the cap, the longest-idle node is dropped for a new one, and
   * when none is idle the new stream is refused.
   */
  readonly maxNodes?: number;
  /** The revision counter; the server shares one between all its states. */
  readonly nextRevision?: () => number;
  /** Where encoded full states are kept and shared; the server shares one between its hubs. */
  readonly fullStates?: FullStateCache;
  /** Encodes a whole local state (tests count the calls). */
  readonly encodeFullState?: FullStateEncoder;
}

/** The Set ops of a whole local state. */
export type FullStateEncoder = (
  services: ReadonlyMap<string, LocalService>,
  serviceCIDRs: readonly string[],
  node?: NodeFacts,
) => Frame[];

type RevisionSource = () => number;

const DEFAULT_LOG_REVISIONS = 256;
const DEFAULT_LOG_ENTRIES = 50_000;

interface NodeStatesOptions {
  readonly maxRevisions?: number;
  readonly maxEntries?: number;
  readonly fullStates?: FullStateCache;
  readonly encode?: FullStateEncoder;
}

export class NodeStates implements Revisioned {
  readonly nodeName: string;
  /** The service proxy name whose Services these states hold; undefined: the server's own. */
  readonly serviceProxyName: string | undefined;
  #current: NodeSnapshot | undefined;
  readonly #log: LogEntry[] = [];
  #logEntries = 0;
  readonly #listeners = new Set<() => void>();
  readonly #nextRevision: RevisionSource;
  readonly #maxRevisions: number;
  readonly #maxEntries: number;
  /**
   * Change sets computed for the current revision, by the revision they start from. Streams of
   * one node at the same revision share them; a new state clears them.
   */
  #computed = new Map<number, readonly Frame[] | undefined>();
  /**
   * The full state's frames, shared by the streams that start from this revision. Bounded: most
   * of their bytes are shared with other nodes, but a node's own segments are not, and 1,000
   * nodes keeping theirs after the first sync would hold about a full copy of every node's state.
   */
  readonly #fullStates: FullStateCache;
  readonly #encodeFull: FullStateEncoder;

  constructor(
    nodeName: string,
    nextRevision: RevisionSource,
    options: NodeStatesOptions = {},
    serviceProxyName?: string,
  ) {
    this.nodeName = nodeName;
    this.serviceProxyName = serviceProxyName;
    this.#nextRevision = nextRevision;
    this.#maxRevisions = options.maxRevisions ?? DEFAULT_LOG_REVISIONS;
    this.#maxEntries = options.maxEntries ?? DEFAULT_LOG_ENTRIES;
    this.#fullStates = options.fullStates ?? new FullStateCache();
    this.#encodeFull = options.encode ?? localFullFrames;
  }

  /** Undefined until the brain has delivered this node's first state. */
  get current(): NodeSnapshot | undefined {
    return this.#current;
  }

  get revision(): number | undefined {
    return this.#current?.revision;
  }

  framesSince(revision: number): readonly Frame[] | undefined {
    if (this.#computed.has(revision)) return this.#computed.get(revision);
    const delta = this.deltaSince(revision);
    const frames = delta === undefined ? undefined : sharedChangeFrames(delta);
    this.#computed.set(revision, frames);
    return frames;
  }

  allFrames(): Frame[] {
    const current = this.#current;
    if (current === undefined) return this.#encodeFull(new Map(), []);
    return this.#fullStates.frames(this, current.revision, () =>
      this.#encodeFull(
        current.state.services,
        allServiceCIDRs(current.state.serviceCIDRs),
        nodeFactsOf(current.state),
      ),
    );
  }

  /** Calls the listener after each new state. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Records a new state from the brain. */
  push(state: LocalState): void {
    const previous = this.#current;
    if (
      previous !== undefined &&
      previous.state.services === state.services &&
      previous.state.serviceCIDRs === state.serviceCIDRs &&
      previous.state.nodeIPs === state.nodeIPs &&
      previous.state.nodePodCIDRs === state.nodePodCIDRs
    )
      return;
    const revision = this.#nextRevision();
    if (previous !== undefined) {
      const changed = new Map<string, LocalService | undefined>();
      for (const [key, before] of serviceChanges(previous.state, state)) changed.set(key, before);
      this.#log.push({
        from: previous.revision,
        previous: changed,
        previousServiceCIDRs: previous.state.serviceCIDRs,
        previousNode: nodeFactsOf(previous.state),
      });
      this.#logEntries += changed.size;
      while (
        this.#log.length > this.#maxRevisions ||
        (this.#logEntries > this.#maxEntries && this.#log.length > 0)
      ) {
        this.#logEntries -= this.#log.shift()?.previous.size ?? 0;
      }
    }
    this.#current = { revision, state };
    this.#computed = new Map();
    this.#fullStates.forget(this);
    for (const listener of [...this.#listeners]) listener();
  }

  /** The Services of the state at `revision`, or undefined when that revision is not known here. */
  servicesAt(revision: number): ServiceLookup | undefined {
    const current = this.#current;
    if (current === undefined) return undefined;
    if (revision === current.revision) return current.state.services;
    const start = this.#log.findIndex((e) => e.from === revision);
    if (start < 0) return undefined;
    // The first change after `revision` holds a Service's value at `revision`.
    const changes = this.#log.slice(start).map((e) => e.previous);
    return {
      get(key) {
        for (const previous of changes) if (previous.has(key)) return previous.get(key);
        return current.state.services.get(key);
      },
    };
  }

  /**
   * The delta from the state at `revision` to the current one, or undefined when that revision
   * is not (or no longer) known here.
   */
  deltaSince(revision: number): LocalDelta | undefined {
    const current = this.#current;
    if (current === undefined) return undefined;
    if (revision === current.revision) return { keys: [], before: () => undefined, after: () => undefined };
    const start = this.#log.findIndex((e) => e.from === revision);
    if (start < 0) return undefined;
    // A stream one revision behind (every stream, after each change) reads the entry as it is.
    let before = this.#log[start]!.previous;
    if (start < this.#log.length - 1) {
      const merged = new Map(before);
      for (let i = start + 1; i < this.#log.length; i++) {
        for (const [k, v] of this.#log[i]!.previous) if (!merged.has(k)) merged.set(k, v);
      }
      before = merged;
    }
    const services = current.state.services;
    const serviceCIDRs = {
      before: allServiceCIDRs(this.#log[start]!.previousServiceCIDRs),
      after: allServiceCIDRs(current.state.serviceCIDRs),
    };
    const node = { before: this.#log[start]!.previousNode, after: nodeFactsOf(current.state) };
    return {
      keys: before.keys(),
      before: (k) => before.get(k),
      after: (k) => services.get(k),
      serviceCIDRs,
      node,
    };
  }
}

/**
 * The feed of one node's local state for the Services of one service proxy name (undefined: the
 * server's own). Throws a StreamRejection when the server does not hold that name's Services.
 */
export type LocalFeedFactory = (nodeName: string, serviceProxyName: string | undefined) => LocalStateFeed;

/** The hub's key of one node's states for one proxy name; NUL is in no node name nor label value. */
function stateKey(nodeName: string, serviceProxyName: string | undefined): string {
  return serviceProxyName === undefined ? nodeName : `${nodeName}\0${serviceProxyName}`;
}

/** The most nodes a Kubernetes cluster is tested with (5,000); a brain serves one state per node. */
export const DEFAULT_MAX_NODES = 5000;

interface HubEntry {
  readonly states: NodeStates;
  readonly unsubscribe: () => void;
  users: number;
  idleTimer: NodeJS.Timeout | undefined;
  /** When the last user left (performance.now()); meaningful while users is 0. */
  idleSince: number;
}

/** The NodeStates of every node someone watches, fed by the brain, shared between streams. */
export class LocalStateHub {
  readonly #feedOf: LocalFeedFactory;
  readonly #nodes = new Map<string, HubEntry>();
  readonly #options: Required<Omit<HubOptions, "nextRevision" | "fullStates" | "encodeFullState">>;
  readonly #nextRevision: () => number;
  readonly #fullStates: FullStateCache;
  readonly #encodeFull: FullStateEncoder;

  constructor(feedOf: LocalFeedFactory, options: HubOptions = {}) {
    this.#feedOf = feedOf;
    let revision = 0;
    this.#nextRevision = options.nextRevision ?? (() => ++revision);
    this.#fullStates = options.fullStates ?? new FullStateCache();
    this.#encodeFull = options.encodeFullState ?? localFullFrames;
    this.#options = {
      maxLogRevisions: options.maxLogRevisions ?? DEFAULT_LOG_REVISIONS,
      maxLogEntries: options.maxLogEntries ?? DEFAULT_LOG_ENTRIES,
      idleNodeMs: options.idleNodeMs ?? 5 * 60_000,
      maxNodes: options.maxNodes ?? DEFAULT_MAX_NODES,
    };
  }

  get nodeCount(): number {
    return this.#nodes.size;
  }

  /**
   * Throws a StreamRejection for a name that is no Node's or no label value, for a proxy name the
   * server does not hold, or when the cap is reached and nothing is idle.
   */
  acquire(nodeName: string, serviceProxyName?: string): NodeStates {
    const key = stateKey(nodeName, serviceProxyName);
    let entry = this.#nodes.get(key);
    if (entry === undefined) {
      if (!isValidNodeName(nodeName)) {
        throw new StreamRejection(
          GrpcStatus.INVALID_ARGUMENT,
          `${JSON.stringify(nodeName.slice(0, 300))} is not a valid Node name (a DNS subdomain of at most 253 characters)`,
        );
      }
      if (serviceProxyName !== undefined && !isServiceProxyName(serviceProxyName)) {
        throw new StreamRejection(
          GrpcStatus.INVALID_ARGUMENT,
          `${JSON.stringify(serviceProxyName.slice(0, 100))} is not a valid service proxy name (a label value)`,
        );
      }
      const feed = this.#feedOf(nodeName, serviceProxyName);
      if (this.#nodes.size >= this.#options.maxNodes && !this.#dropLongestIdle()) {
        throw new StreamRejection(
          GrpcStatus.RESOURCE_EXHAUSTED,
          `already serving ${this.#options.maxNodes} nodes (--max-nodes), all of them watched`,
        );
      }
      const states = new NodeStates(
        nodeName,
        this.#nextRevision,
        {
          maxRevisions: this.#options.maxLogRevisions,
          maxEntries: this.#options.maxLogEntries,
          fullStates: this.#fullStates,
          encode: this.#encodeFull,
        },
        serviceProxyName,
      );
      const unsubscribe = feed.subscribe((state) => states.push(state));
      entry = { states, unsubscribe, users: 0, idleTimer: undefined, idleSince: performance.now() };
      this.#nodes.set(key, entry);
    }
    if (entry.idleTimer !== undefined) clearTimeout(entry.idleTimer);
    entry.idleTimer = undefined;
    entry.users++;
    return entry.states;
  }

  release(states: NodeStates): void {
    const key = stateKey(states.nodeName, states.serviceProxyName);
    const entry = this.#nodes.get(key);
    if (entry === undefined || entry.states !== states || --entry.users > 0) return;
    entry.idleSince = performance.now();
    entry.idleTimer = setTimeout(() => this.#drop(key), this.#options.idleNodeMs);
    entry.idleTimer.unref();
  }

  close(): void {
    for (const key of [...this.#nodes.keys()]) this.#drop(key);
  }

  /** Drops the node that has been idle longest; false when every node is watched. */
  #dropLongestIdle(): boolean {
    let oldest: string | undefined;
    let oldestSince = Number.POSITIVE_INFINITY;
    for (const [name, entry] of this.#nodes) {
      if (entry.users === 0 && entry.idleSince < oldestSince) {
        oldest = name;
        oldestSince = entry.idleSince;
      }
    }
    if (oldest === undefined) return false;
    this.#drop(oldest);
    return true;
  }

  #drop(key: string): void {
    const entry = this.#nodes.get(key);
    if (entry === undefined) return;
    if (entry.idleTimer !== undefined) clearTimeout(entry.idleTimer);
    entry.unsubscribe();
    this.#nodes.delete(key);
  }
}
