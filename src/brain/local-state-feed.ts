// A LocalStateFeed over a ClusterView: one tracker per feed, and per listener a delivery that
// never overlaps itself and keeps only the latest pending state. Pacing (--min-sync-period) is
// not done here: pacedFeed applies it to every feed alike.

import type { ClusterView } from "../model/global.ts";
import type { LocalState, LocalStateFeed } from "../model/local.ts";
import { type Logger, silentLogger } from "../observability/log.ts";
import { Delivery } from "../plugin/paced-feed.ts";
import { LocalStateTracker, type LocalStateTrackerOptions } from "./local-state-tracker.ts";

interface LocalStateFeedOptions extends LocalStateTrackerOptions {
  readonly log?: Logger;
}

type Listener = (state: LocalState) => void | Promise<void>;

/**
 * Emits this node's LocalState after the store has synced (the first emission even when empty),
 * then on each revision change, coalescing. Follows the store only while it has listeners.
 */
export function localStateFeed(
  store: ClusterView,
  nodeName: string,
  options: LocalStateFeedOptions = {},
): LocalStateFeed {
  const log = options.log ?? silentLogger;
  const deliveries = new Set<Delivery>();
  let tracker: LocalStateTracker | undefined;
  let unsubscribeStore: (() => void) | undefined;
  let current: LocalState | undefined;

  const start = (): void => {
    if (tracker !== undefined) return;
    const t = new LocalStateTracker(store, nodeName, { alone: options.alone });
    tracker = t;
    unsubscribeStore = store.subscribe((change) => {
      // Nobody left since the last change: stop here, before computing anything.
      if (deliveries.size === 0) {
        stop();
        return;
      }
      const next = t.update(change);
      if (next === current) return;
      current = next;
      for (const delivery of deliveries) delivery.offer(next);
    });
    // Subscribed after the sync batch went out: the tracker's first update computes every service.
    if (store.isSynced)
      current = t.update({ services: new Set(), nodes: new Set([nodeName]), serviceCIDRs: true });
  };

  // With no listener left, the tracker stops following the store at its next change: a node
  // nobody serves costs nothing after that, and a listener that comes before it (a backend that
  // read the node's facts, then starts its sync loop) takes the state as it is, where a new
  // tracker would compute every service again (seconds at 100k). After it, a new listener
  // starts a tracker again from the store.
  const stop = (): void => {
    unsubscribeStore?.();
    unsubscribeStore = undefined;
    tracker?.retire();
    tracker = undefined;
    current = undefined;
  };

  return {
    subscribe(listener: Listener): () => void {
      start();
      const delivery = new Delivery(listener, 0, log);
      deliveries.add(delivery);
      if (current !== undefined) delivery.offer(current);
      return () => {
        if (!deliveries.delete(delivery)) return;
        delivery.close();
      };
    },
  };
}
