// The brain: the cluster store and this node's local state computed from it.

export { computeLocalService, type NodeView } from "./local-service.ts";
export { type LocalStateFeedOptions, LocalStateTracker, localStateFeed } from "./local-state.ts";
export { ClusterStore, type ClusterStoreOptions } from "./store.ts";
