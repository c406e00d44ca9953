// A full-state sink: the callback gets every service (sorted by key) after each change set.
// The simplest way to write a backend; pair it with DiffStore to apply only what changed.

import type { LocalService, LocalState, LocalStateFeed } from "../model/local.ts";

type FullStateCallback = (services: readonly LocalService[], state: LocalState) => void | Promise<void>;

/** Subscribes the callback to the feed; returns the unsubscribe function. */
export function fullStateSink(feed: LocalStateFeed, callback: FullStateCallback): () => void {
  return feed.subscribe((state) => {
    const services = [...state.services.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, s]) => s);
    return callback(services, state);
  });
}
