// Runs a batch of probes inside a namespace in one process: spawning a process per request
// would cost ~100 ms each.

import { fileURLToPath } from "node:url";
import type { Netns } from "./netns.ts";
import type { ProbeBatch, ProbeRequest, ProbeResult } from "./probe.ts";

const PROBE_SCRIPT = fileURLToPath(new URL("./probe.ts", import.meta.url));

/** Runs every request from inside ns; results are in request order. */
export async function probeFrom(
  ns: Netns,
  requests: readonly ProbeRequest[],
  opts: { readonly concurrency?: number; readonly cgroup?: string | undefined } = {},
): Promise<ProbeResult[]> {
  if (requests.length === 0) return [];
  const batch: ProbeBatch = {
    requests,
    ...(opts.concurrency === undefined ? {} : { concurrency: opts.concurrency }),
    ...(opts.cgroup === undefined ? {} : { cgroup: opts.cgroup }),
  };
  const longest = Math.max(...requests.map((r) => r.timeoutMs ?? 1_000));
  const rounds = Math.ceil(requests.length / Math.max(1, opts.concurrency ?? 16));
  const { stdout } = await ns.exec([process.execPath, PROBE_SCRIPT], {
    stdin: JSON.stringify(batch),
    timeoutMs: 10_000 + longest * rounds,
  });
  const results = JSON.parse(stdout) as ProbeResult[];
  if (!Array.isArray(results) || results.length !== requests.length) {
    throw new Error(`probe: expected ${requests.length} results, got ${stdout.slice(0, 200)}`);
  }
  return results;
}

/** One request from inside ns. */
export async function probeOneFrom(ns: Netns, request: ProbeRequest): Promise<ProbeResult> {
  const [result] = await probeFrom(ns, [request]);
  if (result === undefined) throw new Error("probe: no result");
  return result;
}
