// Shared pieces of the fault suite: a sink that records every state it is given, a logger whose
// lines the test reads, and small waiting helpers.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type { ClusterSink } from "../../src/model/global.ts";
import type { KubeKind, KubeObject } from "../../src/model/kube.ts";
import type { LocalState } from "../../src/model/local.ts";

/** A state feed the test drives: `push` hands a state to the subscriber, as the brain would. */
export class ManualFeed {
  #listener: ((s: LocalState) => void) | undefined;
  readonly #first: LocalState | undefined;
  constructor(first?: LocalState) {
    this.#first = first;
  }
  subscribe(listener: (s: LocalState) => void): () => void {
    this.#listener = listener;
    if (this.#first) listener(this.#first);
    return () => {
      this.#listener = undefined;
    };
  }
  push(s: LocalState): void {
    this.#listener?.(s);
  }
}

/** Records the object names of every replace, per kind, in order. */
export class RecordingClusterSink implements ClusterSink {
  readonly replaces: { kind: KubeKind; names: string[]; at: number }[] = [];
  upsert(_object: KubeObject): void {}
  delete(_kind: KubeKind, _key: string): void {}
  replace(kind: KubeKind, objects: readonly KubeObject[]): void {
    this.replaces.push({ kind, names: objects.map((o) => o.metadata.name), at: performance.now() });
  }
  synced(): void {}
  /** The Service counts of every replace, in order. */
  serviceCounts(): number[] {
    return this.replaces.filter((r) => r.kind === "Service").map((r) => r.names.length);
  }
}

export { capturingLogger } from "../support/capturing-logger.ts";

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function eventually(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (performance.now() < until) {
    if (condition()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting for: ${what}`);
}

/** `kpng <args>` as a child process, its output collected. */
export function startKpng(args: readonly string[]) {
  const main = new URL("../../src/cli/main.ts", import.meta.url).pathname;
  const child = spawn(process.execPath, [main, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const out = { stdout: "", stderr: "" };
  child.stdout.setEncoding("utf8").on("data", (t: string) => {
    out.stdout += t;
  });
  child.stderr.setEncoding("utf8").on("data", (t: string) => {
    out.stderr += t;
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, out, exited };
}
