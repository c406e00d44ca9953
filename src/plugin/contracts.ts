// The plug-in points of the CLI grammar `kpng <source> [to-local] <sink>`. Each source and sink
// lives with its own code and is listed once in plugins.ts; main.ts only wires them.

import type { Command } from "commander";
import type { ClusterStore } from "../brain/store.ts";
import type { ClusterSource } from "../model/global.ts";
import type { LocalStateFeed } from "../model/local.ts";
import type { Logger } from "../observability/log.ts";

export type Options = Record<string, unknown>;

export interface RunContext {
  /** Aborted on SIGINT/SIGTERM; a sink stops and cleans up what it must, then resolves. */
  readonly signal: AbortSignal;
  readonly log: Logger;
}

/** `kpng file …`, `kpng kube …`, `kpng api …`: where the cluster-wide objects come from. */
export interface SourcePlugin {
  readonly name: string;
  readonly description: string;
  addOptions(cmd: Command): void;
  /** Throws an Error whose message says what to fix when an option is wrong. */
  create(opts: Options, ctx: RunContext): ClusterSource;
}

/** `… to-local <sink>` and `kpng local … <sink>`: consumers of one node's local state. */
export interface LocalSinkPlugin {
  readonly name: string;
  readonly description: string;
  addOptions(cmd: Command): void;
  /** Consumes the feed until ctx.signal aborts (or until done, e.g. with --once). */
  run(feed: LocalStateFeed, opts: Options, ctx: RunContext): Promise<void>;
  /** Default of --min-sync-period, a duration such as "1s" (the default when unset, as kube-proxy). */
  readonly defaultMinSyncPeriod?: string;
  /**
   * `kpng cleanup <name without "to-">`: removes everything the sink installed (rules, tables),
   * then resolves. Gets the same options as the sink.
   */
  cleanup?(opts: Options, ctx: RunContext): Promise<void>;
}

/** `… to-api`, `… to-json` directly after a source: consumers of the global state. */
export interface GlobalSinkPlugin {
  readonly name: string;
  readonly description: string;
  addOptions(cmd: Command): void;
  run(store: ClusterStore, opts: Options, ctx: RunContext): Promise<void>;
}

/** `kpng local --api …`: a source of one node's local state computed by a remote brain. */
export interface LocalSourcePlugin {
  /** The command word, e.g. "local" for `kpng local --api … to-nft`. */
  readonly name: string;
  readonly description: string;
  addOptions(cmd: Command): void;
  /** The node whose state is wanted comes from the sink's --node-name. */
  createFeed(opts: Options, nodeName: string, ctx: RunContext): LocalStateFeed;
}

/** `kpng fallback-controller …`: a cluster-level controller, run on its own. */
export interface ControllerPlugin {
  readonly name: string;
  readonly description: string;
  addOptions(cmd: Command): void;
  /** Runs until ctx.signal aborts. Throws UsageError for a bad option before starting anything. */
  run(opts: Options, ctx: RunContext): Promise<void>;
}
