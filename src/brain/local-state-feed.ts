// A LocalStateFeed over a ClusterStore: one tracker per feed, and per listener a delivery loop
// that never overlaps itself, keeps only the latest pending state, and waits minSyncPeriodMs
// between deliveries.

import type { LocalState, LocalStateFeed } from "../model/local.ts";
import { type Logger, silentLogger } from "../observability/log.ts";
import { LocalStateTracker } from "./local-state-tracker.ts";
import type { ClusterStore } from "./store.ts";

export interface LocalStateFeedOptions {
  /** Least time between the starts of two deliveries to a listener; default 0. */
  readonly minSyncPeriodMs?: number;
  readonly log?: Logger;
}

type Listener = (state: LocalState) => void | Promise<void>;

/** Delivers states to one listener: never concurrently, coalescing, rate-limited. */
class Delivery {
  readonly #listener: Listener;
  readonly #minPeriodMs: number;
  readonly #log: Logger;
  #pending: LocalState | undefined;
  #running = false;
  #timer: NodeJS.Timeout | undefined;
  #lastStart = Number.NEGATIVE_INFINITY;
  #closed = false;

  constructor(listener: Listener, minPeriodMs: number, log: Logger) {
    this.#listener = listener;
    this.#minPeriodMs = minPeriodMs;
    this.#log = log;
  }

  offer(state: LocalState): void {
    this.#pending = state;
    this.#pump();
  }

  close(): void {
    this.#closed = true;
    this.#pending = undefined;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #pump(): void {
    if (this.#closed || this.#running || this.#timer !== undefined || this.#pending === undefined) return;
    const wait = this.#lastStart + this.#minPeriodMs - performance.now();
    if (wait > 0) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#pump();
      }, wait);
      return;
    }
    const state = this.#pending;
    this.#pending = undefined;
    this.#running = true;
    this.#lastStart = performance.now();
    void this.#deliver(state);
  }

  async #deliver(state: LocalState): Promise<void> {
    try {
      await this.#listener(state);
    } catch (err) {
      this.#log.error({ err, revision: state.revision }, "local state listener failed");
    } finally {
      this.#running = false;
      this.#pump();
    }
  }
}

/**
 * Emits this node's LocalState after the store has synced (the first emission even when empty),
 * then on each revision change, rate-limited to minSyncPeriodMs (default 0), coalescing.
 */
export function localStateFeed(
  store: ClusterStore,
  nodeName: string,
  options: LocalStateFeedOptions = {},
): LocalStateFeed {
  const minPeriodMs = options.minSyncPeriodMs ?? 0;
  const log = options.log ?? silentLogger;
  const deliveries = new Set<Delivery>();
  let tracker: LocalStateTracker | undefined;
  let current: LocalState | undefined;

  const start = (): void => {
    if (tracker !== undefined) return;
    const t = new LocalStateTracker(store, nodeName);
    tracker = t;
    store.subscribe((change) => {
      const next = t.update(change);
      if (next === current) return;
      current = next;
      for (const delivery of deliveries) delivery.offer(next);
    });
    // Subscribed after the sync batch went out: naming this node recomputes every service.
    if (store.isSynced)
      current = t.update({ services: new Set(), nodes: new Set([nodeName]), serviceCIDRs: true });
  };

  return {
    subscribe(listener: Listener): () => void {
      start();
      const delivery = new Delivery(listener, minPeriodMs, log);
      deliveries.add(delivery);
      if (current !== undefined) delivery.offer(current);
      return () => {
        deliveries.delete(delivery);
        delivery.close();
      };
    },
  };
}
