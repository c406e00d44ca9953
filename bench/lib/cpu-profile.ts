// Reads a V8 CPU profile (`node --cpu-prof`) and says where the time went: self time per layer of
// kpng (source, store and brain, nft rendering, …), GC and idle (waiting for nft or the API
// server), and the functions with the most self time.

import { readFileSync } from "node:fs";

interface ProfileNode {
  readonly id: number;
  readonly callFrame: {
    readonly functionName: string;
    readonly url: string;
    readonly lineNumber: number;
  };
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  /** CLOCK_MONOTONIC, µs: what process.hrtime() reads in any process of this machine. */
  readonly startTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

export interface ProfileSummary {
  readonly totalMs: number;
  readonly byLayer: readonly (readonly [string, number])[];
  readonly topFunctions: readonly (readonly [string, string, number])[];
}

/** The layer a function belongs to, from its script's path. */
export function layerOf(functionName: string, url: string): string {
  if (functionName === "(garbage collector)") return "GC";
  if (functionName === "(idle)") return "idle (waiting: nft, API server, I/O)";
  if (functionName === "(program)") return "V8 (compile, runtime)";
  const layers: readonly (readonly [string, string])[] = [
    ["/src/brain/store", "store"],
    ["/src/brain/", "brain"],
    ["/src/sources/kube/", "kube source"],
    ["/src/sources/file/", "file source"],
    ["/src/backends/nft/", "nft rendering/apply"],
    ["/src/model/", "model (validation)"],
    ["/src/plugin/", "pacer"],
    ["/src/node/", "node services, exec"],
    ["/src/", "other kpng"],
  ];
  for (const [part, layer] of layers) if (url.includes(part)) return layer;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg !== undefined) return `package ${pkg}`;
  if (url.startsWith("node:")) return "node core";
  return "native builtins (JSON, RegExp, …)";
}

/** A stretch of a profiled process's life, in CLOCK_MONOTONIC µs (see monotonicUs). */
export interface ProfileWindow {
  readonly fromUs: number;
  readonly toUs: number;
}

/** Now on the clock V8 stamps its profile samples with, µs. */
export function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** Where the sampled time went; with `window`, only the samples taken inside it. */
export function summarizeProfile(path: string, top = 15, window?: ProfileWindow): ProfileSummary {
  const profile = JSON.parse(readFileSync(path, "utf8")) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  let totalUs = 0;
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    at += dt;
    if (window !== undefined && (at < window.fromUs || at > window.toUs)) return;
    selfUs.set(id, (selfUs.get(id) ?? 0) + dt);
    totalUs += dt;
  });
  const layers = new Map<string, number>();
  const functions = new Map<string, { layer: string; us: number }>();
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)?.callFrame;
    if (frame === undefined) continue;
    const layer = layerOf(frame.functionName, frame.url);
    layers.set(layer, (layers.get(layer) ?? 0) + us);
    const file = frame.url.replace(/^.*\/(src|node_modules)\//, "$1/").replace(/^file:\/\//, "");
    const name = `${frame.functionName || "(anonymous)"} ${file ? `${file}:${frame.lineNumber + 1}` : ""}`;
    const f = functions.get(name) ?? { layer, us: 0 };
    f.us += us;
    functions.set(name, f);
  }
  return {
    totalMs: totalUs / 1000,
    byLayer: [...layers].sort((a, b) => b[1] - a[1]).map(([l, us]) => [l, us / 1000] as const),
    topFunctions: [...functions]
      .filter(([, f]) => !f.layer.startsWith("idle"))
      .sort((a, b) => b[1].us - a[1].us)
      .slice(0, top)
      .map(([name, f]) => [name.trim(), f.layer, f.us / 1000] as const),
  };
}
