// The plug-in points of the CLI grammar `kpng <source> [to-local] <sink>`. Each source and sink
// lives with its own code and is listed once in src/cli/plugins.ts. Every plug-in parses its own
// options once, up front, into a typed object (parseOptions): a bad value is a UsageError before
// anything starts, and run/create only ever see checked values.

import type { Command } from "commander";
import type { ClusterSource, ClusterView } from "../model/global.ts";
import type { IPFamily } from "../model/kube.ts";
import type { LocalStateFeed, ServiceLookup } from "../model/local.ts";
import type { Logger } from "../observability/log.ts";
import type { RulesReader } from "./rules-reader.ts";

/** The values commander collected for a command line (every plug-in's options together). */
export type RawOptions = Readonly<Record<string, unknown>>;

export interface RunContext {
  /** Aborted on SIGINT/SIGTERM; a sink stops and cleans up what it must, then resolves. */
  readonly signal: AbortSignal;
  readonly log: Logger;
}

export interface SourceContext extends RunContext {
  /** The node a local sink serves; undefined when a global sink serves every node. */
  readonly nodeName: string | undefined;
  /**
   * The brain serves several service proxy names (one backend each) or explains every Service:
   * read every Service whatever proxy it names, the brain selects. Unset: only the source's own.
   */
  readonly everyProxyName?: boolean;
}

interface Plugin<O> {
  readonly name: string;
  readonly description: string;
  addOptions(cmd: Command): void;
  /**
   * This plug-in's options, checked and typed, from the raw values of the command line (which
   * also hold other plug-ins' options: read only your own). Throws a UsageError whose message
   * names the flag and says what to fix.
   */
  parseOptions(raw: RawOptions): O;
}

/** `kpng file …`, `kpng kube …`, `kpng api …`: where the cluster-wide objects come from. */
export interface SourcePlugin<O = unknown> extends Plugin<O> {
  create(opts: O, ctx: SourceContext): ClusterSource;
}

/** `… to-local <sink>` and `kpng local … <sink>`: consumers of one node's local state. */
export interface LocalSinkPlugin<O = unknown> extends Plugin<O> {
  /** Consumes the feed until ctx.signal aborts (or until done, e.g. with --once). */
  run(feed: LocalStateFeed, opts: O, ctx: RunContext): Promise<void>;
  /** Default of --min-sync-period, a duration such as "1s" (the default when unset, as kube-proxy). */
  readonly defaultMinSyncPeriod?: string;
  /**
   * `kpng cleanup <name without "to-">`: removes everything the sink installed (rules, tables),
   * then resolves. Gets the same options as the sink.
   */
  cleanup?(opts: O, ctx: RunContext): Promise<void>;
  /** `kpng explain --rules <name without "to-">`: reads what the backend programmed for a Service. */
  rulesReader?(opts: O, ctx: RunContext): Promise<RulesReader>;
  /**
   * Every program run() and cleanup() may start (nft, iptables-nft-restore, ip, …): the container
   * image must contain each (test/unit/deploy/image-binaries.test.ts checks deploy/Dockerfile).
   */
  readonly binaries: readonly string[];
  /**
   * What it programs that no other sink of the same process may program too (nft tables of one
   * name, the pins under one bpffs directory): a second sink claiming one is refused before
   * either starts.
   */
  owns?(opts: O): readonly Owned[];
}

/** Something a sink programs alone, and how two sinks keep apart. */
export interface Owned {
  /** "nft tables ip/ip6 kpng" */
  readonly what: string;
  /** What to change so that two sinks do not share it: "give one of them another --table-name". */
  readonly fix: string;
}

export interface GlobalSinkContext extends RunContext {
  /** The source's --service-proxy-name, whose Services `cluster` holds ("" the unlabelled ones). */
  readonly serviceProxyName: string;
  /** Set when the sink asked for every proxy name (everyProxyName): the backends it serves. */
  readonly remoteBackends?: RemoteBackends;
}

/**
 * The backends on each node that a brain serves every proxy name to, one per name and node, as
 * the handover of a relabelled Service sees them: the losing backend keeps the Service until the
 * gaining one on the same node reports a sync that holds it.
 */
export interface RemoteBackends {
  /** The share of the brain's Services labelled `serviceProxyName`, for its backend on `nodeName`. */
  view(serviceProxyName: string, nodeName: string): ClusterView;
  /** That backend reports its syncs (`programmed`); one that never says so is waited for less. */
  reportsSyncs(nodeName: string, serviceProxyName: string): void;
  /** That backend synced a state holding `services` into its rules of `families`. */
  programmed(
    nodeName: string,
    serviceProxyName: string,
    services: ServiceLookup,
    families: readonly IPFamily[],
  ): void;
}

/** `… to-api`, `… to-json` directly after a source: consumers of the global state. */
export interface GlobalSinkPlugin<O = unknown> extends Plugin<O> {
  run(cluster: ClusterView, opts: O, ctx: GlobalSinkContext): Promise<void>;
  /** The sink serves every service proxy name: the source reads every Service, whatever its label. */
  everyProxyName?(opts: O): boolean;
}

/** `kpng local --api …`: a source of one node's local state computed by a remote brain. */
export interface LocalSourcePlugin<O = unknown> extends Plugin<O> {
  /** The command word, e.g. "local" for `kpng local --api … to-nft`. */
  readonly name: string;
  /**
   * The node whose state is wanted comes from the sink's --node-name, the service proxy name from
   * its --service-proxy-name (undefined when not given: the remote brain's own).
   */
  createFeed(opts: O, nodeName: string, ctx: RunContext, serviceProxyName?: string): LocalStateFeed;
}

/** `kpng fallback-controller …`: a cluster-level controller, run on its own. */
export interface ControllerPlugin<O = unknown> extends Plugin<O> {
  /** Runs until ctx.signal aborts. */
  run(opts: O, ctx: RunContext): Promise<void>;
}
