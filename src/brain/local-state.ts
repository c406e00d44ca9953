// This node's local state: the tracker that computes it and the feed that delivers it.

export { type LocalStateFeedOptions, localStateFeed } from "./local-state-feed.ts";
export { LocalStateTracker } from "./local-state-tracker.ts";
