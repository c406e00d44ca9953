// The demo's second act: a Service with a fallback selector, served by its own pods, then by its
// fallback pods when its own stop being ready, then by its own again. The demo plays
// `kpng fallback-controller`'s part by rewriting the cluster file the way the controller rewrites
// EndpointSlices, and shows which pod answers at each step.

import { parseAllDocuments } from "yaml";
import { FALLBACK_MANAGER, LABEL_FALLBACK_ACTIVE, LABEL_MANAGED_BY } from "../../src/model/fallback.ts";
import { LABEL_SERVICE_NAME } from "../../src/model/kube.ts";
import type { ClusterFileContents } from "../../src/sources/file/parse.ts";

/** A Service the act plays, with the pods of its own slices and of its fallback slices. */
export interface FallbackStory {
  readonly namespace: string;
  readonly name: string;
  readonly primaryPods: readonly string[];
  readonly fallbackPods: readonly string[];
}

/** Every Service of the cluster that has fallback slices and pods of its own. */
export function fallbackStories(cluster: ClusterFileContents): FallbackStory[] {
  const stories: FallbackStory[] = [];
  for (const svc of cluster.services) {
    const { namespace, name } = svc.metadata;
    const slices = cluster.endpointSlices.filter(
      (s) => s.metadata.namespace === namespace && s.serviceName === name,
    );
    const pods = (fallback: boolean) =>
      slices
        .filter((s) => (s.metadata.labels[LABEL_MANAGED_BY] === FALLBACK_MANAGER) === fallback)
        .flatMap((s) => s.endpoints.map((e) => e.podName))
        .filter((p) => p !== "");
    const story = { namespace, name, primaryPods: pods(false), fallbackPods: pods(true) };
    if (story.primaryPods.length > 0 && story.fallbackPods.length > 0) stories.push(story);
  }
  return stories;
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The cluster file with the story's Service switched as the controller would: `fallback` true
 * means its own endpoints are not ready and its fallback slices are active (and ready); false
 * means its own are ready and the fallback slices inactive, with no ready or serving endpoint
 * (so that no proxy sends traffic to them). Everything else is unchanged. JSON documents.
 */
export function switchFallback(text: string, story: FallbackStory, fallback: boolean): string {
  const docs: unknown[] = [];
  for (const doc of parseAllDocuments(text)) {
    const value = doc.toJS() as unknown;
    if (value === null || value === undefined) continue;
    if (isObj(value) && value.kind === "List" && Array.isArray(value.items)) docs.push(...value.items);
    else docs.push(value);
  }
  for (const doc of docs) {
    if (!isObj(doc) || doc.kind !== "EndpointSlice" || !isObj(doc.metadata)) continue;
    const meta = doc.metadata;
    const labels = isObj(meta.labels) ? meta.labels : {};
    if ((meta.namespace ?? "default") !== story.namespace || labels[LABEL_SERVICE_NAME] !== story.name)
      continue;
    const isFallback = labels[LABEL_MANAGED_BY] === FALLBACK_MANAGER;
    const ready = isFallback === fallback;
    if (isFallback) meta.labels = { ...labels, [LABEL_FALLBACK_ACTIVE]: String(fallback) };
    for (const ep of Array.isArray(doc.endpoints) ? doc.endpoints : []) {
      if (isObj(ep)) ep.conditions = { ready, serving: ready, terminating: false };
    }
  }
  return docs.map((d) => JSON.stringify(d)).join("\n---\n");
}
