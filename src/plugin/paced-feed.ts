// The one pacer of local states: every sink gets its states through a Delivery, which never
// calls the listener concurrently, keeps only the latest pending state, and starts two calls at
// least `minPeriodMs` apart. `--min-sync-period` sets that period for every local sink, whether
// the states come from the brain in this process or from a remote brain.

import type { LocalState, LocalStateFeed } from "../model/local.ts";
import { type Logger, silentLogger } from "../observability/log.ts";

type Listener = (state: LocalState) => void | Promise<void>;

/** Delivers states to one listener: never concurrently, coalescing, rate-limited. */
export class Delivery {
  readonly #listener: Listener;
  readonly #minPeriodMs: number;
  readonly #log: Logger;
  readonly #now: () => number;
  #pending: LocalState | undefined;
  #running = false;
  #timer: NodeJS.Timeout | undefined;
  #lastStart = Number.NEGATIVE_INFINITY;
  #closed = false;

  constructor(
    listener: Listener,
    minPeriodMs: number,
    log: Logger,
    now: () => number = () => performance.now(),
  ) {
    this.#listener = listener;
    this.#minPeriodMs = minPeriodMs;
    this.#log = log;
    this.#now = now;
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
    const wait = this.#lastStart + this.#minPeriodMs - this.#now();
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
    this.#lastStart = this.#now();
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
 * The same feed, with each listener's calls started at least `minPeriodMs` apart. `now` is a
 * monotonic clock in milliseconds (injectable for tests).
 */
export function pacedFeed(
  feed: LocalStateFeed,
  minPeriodMs: number,
  log: Logger = silentLogger,
  now?: () => number,
): LocalStateFeed {
  if (minPeriodMs <= 0) return feed;
  return {
    subscribe(listener: Listener): () => void {
      const delivery = new Delivery(listener, minPeriodMs, log, now);
      const unsubscribe = feed.subscribe((state) => delivery.offer(state));
      return () => {
        unsubscribe();
        delivery.close();
      };
    },
    programmed: (state, families) => feed.programmed?.(state, families),
  };
}
