// The to-json sinks as CLI plug-ins: `… to-local to-json` (one node's local state) and
// `<source> to-json` (the global model).

import type { Command } from "commander";
import { z } from "zod";
import type { GlobalSinkPlugin, LocalSinkPlugin, RawOptions } from "../../plugin/contracts.ts";
import { parseOptionsWith, switchFlag } from "../../plugin/options.ts";
import { printGlobalStates } from "./print-global.ts";
import { printLocalStates } from "./print-local.ts";
import { streamWriter } from "./write.ts";

function addOnceOption(cmd: Command): void {
  cmd.option("--once", "print the first complete state and exit");
}

const jsonSinkFlags = z.object({ once: switchFlag });

type JsonSinkFlags = z.output<typeof jsonSinkFlags>;

function parseJsonSinkOptions(raw: RawOptions): JsonSinkFlags {
  return parseOptionsWith(jsonSinkFlags, raw);
}

/** Documents go to stdout; with --once only the first complete one. */
function toStdout(opts: JsonSinkFlags, signal: AbortSignal) {
  return { once: opts.once, write: streamWriter(process.stdout), signal };
}

export const toJsonLocalSink: LocalSinkPlugin<JsonSinkFlags> = {
  name: "to-json",
  description: "print this node's local state as JSON on stdout, one document per new state",
  // A dump shows every state; there is no kernel to protect from bursts of changes.
  defaultMinSyncPeriod: "0s",
  binaries: [],
  addOptions: addOnceOption,
  parseOptions: parseJsonSinkOptions,
  run: (feed, opts, ctx) => printLocalStates(feed, toStdout(opts, ctx.signal)),
};

export const toJsonGlobalSink: GlobalSinkPlugin<JsonSinkFlags> = {
  name: "to-json",
  description: "print the global model (Services, EndpointSlices, Nodes) as JSON on stdout",
  addOptions: addOnceOption,
  parseOptions: parseJsonSinkOptions,
  run: (store, opts, ctx) => printGlobalStates(store, toStdout(opts, ctx.signal)),
};
