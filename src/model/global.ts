// The global (cluster-wide) model as sources deliver it: validated objects, keyed and typed.

import type { KubeKind, KubeObject } from "./kube.ts";

/** Where a source delivers what it reads. The brain's ClusterStore implements it. */
export interface ClusterSink {
  /** Adds or replaces one object. */
  upsert(object: KubeObject): void;
  /** Removes one object by its key ("namespace/name", or the name for a Node). */
  delete(kind: KubeKind, key: string): void;
  /** Replaces every object of a kind, as after a (re)list: objects missing from the list are deleted. */
  replace(kind: KubeKind, objects: readonly KubeObject[]): void;
  /**
   * Every kind the source watches has been listed at least once. Nothing is computed for a node
   * before this; a source calls it once, after its first complete read.
   */
  synced(): void;
}

/** A source of cluster objects: the Kubernetes API, a file, or another brain's global API. */
export interface ClusterSource {
  /** Starts reading into the sink. Resolves once started; reading goes on until stop(). */
  start(sink: ClusterSink): Promise<void>;
  stop(): Promise<void>;
}
