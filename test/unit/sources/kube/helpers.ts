// Shared by the kube source tests: a sink that records what it is told, and a poller.

import { loadKubeConfig } from "../../../../src/kube/kubeconfig.ts";
import { KubeConfigTransport, type KubeTransport } from "../../../../src/kube/transport.ts";
import type { ClusterSink } from "../../../../src/model/global.ts";
import { type KubeKind, type KubeObject, objectKey } from "../../../../src/model/kube.ts";

export class RecordingSink implements ClusterSink {
  /** One line per call: "upsert Service default/a", "delete …", "replace Service [a,b]", "synced". */
  readonly calls: string[] = [];
  readonly objects = new Map<string, KubeObject>();
  syncedCount = 0;
  /** Throws from upsert for objects with this name, as a buggy consumer would. */
  throwOnName: string | undefined;
  /** Set by a test that takes lists page by page; unset, lists arrive as one replace. */
  startList?: ClusterSink["startList"];

  upsert(object: KubeObject): void {
    const key = objectKey(object.metadata);
    this.calls.push(`upsert ${object.kind} ${key}`);
    if (object.metadata.name === this.throwOnName) throw new Error(`sink exploded on ${key}`);
    this.objects.set(`${object.kind} ${key}`, object);
  }

  delete(kind: KubeKind, key: string): void {
    this.calls.push(`delete ${kind} ${key}`);
    this.objects.delete(`${kind} ${key}`);
  }

  replace(kind: KubeKind, objects: readonly KubeObject[]): void {
    this.calls.push(`replace ${kind} [${objects.map((o) => objectKey(o.metadata)).join(",")}]`);
    for (const key of [...this.objects.keys()]) if (key.startsWith(`${kind} `)) this.objects.delete(key);
    for (const o of objects) this.objects.set(`${o.kind} ${objectKey(o.metadata)}`, o);
  }

  synced(): void {
    this.calls.push("synced");
    this.syncedCount++;
  }

  has(kind: KubeKind, key: string): boolean {
    return this.objects.has(`${kind} ${key}`);
  }

  names(kind: KubeKind): string[] {
    return [...this.objects.values()]
      .filter((o) => o.kind === kind)
      .map((o) => objectKey(o.metadata))
      .sort();
  }
}

export async function waitFor(what: string, condition: () => boolean, timeoutMs = 5000): Promise<number> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return Date.now() - started;
}

const NO_ENVIRONMENT = { env: {}, fileExists: () => false, homeDir: "/nonexistent" };

export function transportTo(url: string): KubeConfigTransport {
  return new KubeConfigTransport(loadKubeConfig({ master: url }, NO_ENVIRONMENT).config);
}

/** Runs `before` ahead of each request, e.g. to change the server between two list pages. */
export class HookedTransport implements KubeTransport {
  readonly #inner: KubeTransport;
  readonly #before: (pathAndQuery: string) => void;
  constructor(inner: KubeTransport, before: (pathAndQuery: string) => void) {
    this.#inner = inner;
    this.#before = before;
  }
  get(pathAndQuery: string, signal: AbortSignal) {
    this.#before(pathAndQuery);
    return this.#inner.get(pathAndQuery, signal);
  }
}
