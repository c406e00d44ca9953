// `kpng <source> … to-local <sink> [options] <sink> [options] …`: several local sinks fed by one
// brain, each serving the Services of its own --service-proxy-name. The command line is cut at
// each sink word; each piece is parsed as a one-sink command line (so every sink checks its own
// options as usual), and the pieces are joined into one invocation.

import type { LocalSinkPlugin } from "../plugin/contracts.ts";
import { UsageError } from "../plugin/usage-error.ts";
import type { Invocation } from "./invocation.ts";

/** One sink of a to-local invocation, with what only it decides. */
export interface SinkRun {
  readonly sink: LocalSinkPlugin;
  readonly sinkOpts: unknown;
  readonly nodeName: string;
  readonly minSyncPeriodMs: number;
  /** The Services it serves: those labelled with this name ("" is the unlabelled ones). */
  readonly serviceProxyName: string;
}

/**
 * The one-sink command lines of a several-sink `to-local` command line, each being the words up
 * to `to-local` followed by one sink's words; undefined when it names at most one sink.
 */
export function sinkSegments(words: readonly string[], sinkNames: readonly string[]): string[][] | undefined {
  const toLocal = words.indexOf("to-local");
  if (toLocal < 0) return undefined;
  const starts: number[] = [];
  for (let i = toLocal + 1; i < words.length; i++) if (sinkNames.includes(words[i] ?? "")) starts.push(i);
  if (starts.length < 2) return undefined;
  const prefix = words.slice(0, (starts[0] ?? 0) as number);
  return starts.map((start, k) => [...prefix, ...words.slice(start, starts[k + 1] ?? words.length)]);
}

/** The sinks of an invocation: one, or several from sinkSegments. */
export function sinkRuns(invocation: Extract<Invocation, { form: "to-local" }>): readonly SinkRun[] {
  const { sink, sinkOpts, nodeName, minSyncPeriodMs, serviceProxyName } = invocation;
  return [{ sink, sinkOpts, nodeName, minSyncPeriodMs, serviceProxyName }, ...(invocation.moreSinks ?? [])];
}

/**
 * One invocation from the invocations of each segment: the source and its options are those of
 * the first. Every sink serves another proxy name and the same node, or it is a UsageError.
 */
export function joinSinkInvocations(parsed: readonly Invocation[]): Invocation {
  const [first, ...rest] = parsed;
  if (first === undefined || first.form !== "to-local")
    throw new UsageError("several sinks are possible only after to-local");
  const more: SinkRun[] = [];
  for (const inv of rest) {
    if (inv.form !== "to-local") throw new UsageError("several sinks are possible only after to-local");
    more.push(...sinkRuns(inv));
  }
  const all = [...sinkRuns(first), ...more];
  const seen = new Map<string, string>();
  for (const run of all) {
    const other = seen.get(run.serviceProxyName);
    const name =
      run.serviceProxyName === ""
        ? "the unlabelled Services"
        : `--service-proxy-name ${run.serviceProxyName}`;
    if (other !== undefined)
      throw new UsageError(
        `${other} and ${run.sink.name} both serve ${name}: give each sink its own --service-proxy-name`,
      );
    seen.set(run.serviceProxyName, run.sink.name);
    if (run.nodeName !== first.nodeName)
      throw new UsageError(
        `--node-name: every sink serves the same node (${first.nodeName}), ${run.sink.name} names ${run.nodeName}`,
      );
  }
  refuseShared(all);
  return { ...first, moreSinks: more };
}

/**
 * Two sinks that would program the same kernel objects (to-nft and to-ebpf's nft rules in one
 * table) undo each other's changes: a UsageError naming the object and the flag to change.
 */
function refuseShared(runs: readonly SinkRun[]): void {
  const owner = new Map<string, string>();
  for (const run of runs)
    for (const owned of run.sink.owns?.(run.sinkOpts) ?? []) {
      const other = owner.get(owned.what);
      if (other !== undefined)
        throw new UsageError(`${other} and ${run.sink.name} would both program ${owned.what}: ${owned.fix}`);
      owner.set(owned.what, run.sink.name);
    }
}
