// A backend run beside another one, in the same process, on the same feed and node services:
// the eBPF backend balances what the node originates in its sockets and leaves traffic from
// other machines (and the drops) to nft rules. The composing sink is handed the companion, so
// neither backend imports the other.

import type { Command } from "commander";
import type { LocalStateFeed } from "../model/local.ts";
import type { NodeServicesFlags } from "../node/options.ts";
import type { SyncObserver } from "../node/sync-observer.ts";
import type { Owned, RawOptions, RunContext } from "../plugin/contracts.ts";
import type { RulesReader } from "../plugin/rules-reader.ts";

export interface CompanionBackend<O = unknown> {
  /** Every program it may start, node services included (the image must contain each). */
  readonly binaries: readonly string[];
  /** The backend's flags (including the node services' flags, which the composing sink uses). */
  addOptions(cmd: Command): void;
  parseOptions(raw: RawOptions): O;
  /** What the composing sink needs from the companion's options. */
  settings(opts: O): {
    readonly node: NodeServicesFlags;
    readonly syncPeriodMs: number;
    readonly dryRun: boolean;
  };
  /**
   * Reads the node's addresses and takes what the backend holds exclusively; programs nothing.
   * `owner` is the mode of the backend it serves: its metrics' `backend` label is the owner's
   * and its own ("ebpf-nftables"), apart from a backend of its own kind in the same process.
   */
  prepare(opts: O, ctx: RunContext, owner: string): Promise<PreparedCompanion>;
  /** For `kpng explain --rules`: the node's addresses and a reader of the companion's rules; takes nothing. */
  inspect(opts: O): Promise<InspectedCompanion>;
  /** Removes what the backend installed. */
  cleanup(opts: O, ctx: RunContext): Promise<void>;
  /** What it programs alone (the composing sink's `owns`). */
  owns(opts: O): readonly Owned[];
}

interface CompanionAddresses {
  /** Where NodePorts are served (CIDRs of node addresses). */
  readonly nodePortCIDRs: readonly string[];
  /** Every address of the node. */
  readonly hostIPs: readonly string[];
}

interface InspectedCompanion extends CompanionAddresses {
  readonly rules: RulesReader;
}

export interface PreparedCompanion {
  /** The node's addresses now: they are followed while the companion is prepared. */
  current(): CompanionAddresses;
  /** Calls `listener` after each change of the node's addresses. */
  subscribe(listener: () => void): () => void;
  /** Follows the feed until the signal aborts, repairing its own rules (its probe). */
  run(feed: LocalStateFeed, signal: AbortSignal, observer: SyncObserver): Promise<void>;
  /** Releases what prepare took; the rules stay in place. */
  close(): Promise<void>;
}
