// What one service contributes to one family's table: its chains (with their rules), the shared
// chains it uses, its ClientIP affinity sets and its elements in the shared maps and sets.
// Fragments are plain data, so the renderer stays pure and the sync can diff them.

import type { NodeAddresses } from "../../backend-core/family-settings.ts";
import type { NftFamily } from "../../model/ip.ts";
import type { Generation } from "./names.ts";

export interface ChainSpec {
  readonly name: string;
  readonly rules: readonly string[];
  /** 0 for chains that only reference static chains and sets, 1 for chains that jump to level-0 chains. */
  readonly level: 0 | 1;
}

export interface ElementSpec {
  /** Name of the static map or set. */
  readonly set: string;
  /** Canonical key text, e.g. `10.96.0.1 . tcp . 80`. */
  readonly key: string;
  /** Verdict (`goto x`, `drop`) or endpoint (`10.1.0.5 . 8080`) for maps, "" for sets. */
  readonly value: string;
}

/**
 * One service port's endpoints in an endpoints map: the elements `<prefix><i> : values[i]`.
 * They change together, so the mirror tracks them as one.
 */
export interface ElementGroupSpec {
  readonly set: string;
  /** The key up to the index, e.g. `10.96.0.1 . 80 . `. */
  readonly prefix: string;
  readonly values: readonly string[];
}

export interface AffinitySetSpec {
  readonly name: string;
  readonly timeoutSeconds: number;
}

export interface Fragment {
  readonly chains: readonly ChainSpec[];
  /** `pick-<N>` chains this fragment uses; several services share each, so the mirror counts users. */
  readonly sharedChains: readonly ChainSpec[];
  readonly affinitySets: readonly AffinitySetSpec[];
  readonly elements: readonly ElementSpec[];
  readonly groups: readonly ElementGroupSpec[];
  /** The endpoint addresses it uses: each needs its `<ip> . <ip>` hairpin element. */
  readonly hairpins: readonly string[];
}

export const EMPTY_FRAGMENT: Fragment = {
  chains: [],
  sharedChains: [],
  affinitySets: [],
  elements: [],
  groups: [],
  hairpins: [],
};

/** How a table is configured: everything the renderer needs beyond the local state. */
export interface TableConfig extends NodeAddresses {
  readonly family: NftFamily;
  readonly table: string;
  /**
   * The node's own TCP and UDP is balanced in its sockets (to-ebpf's cgroup programs): the table
   * then holds the paths of traffic from other machines, and of the node's traffic only what the
   * programs pass on unchanged (drops, SCTP, load-balancer IPs with source ranges).
   */
  readonly socketBalanced?: boolean;
  /** The generation of the endpoint maps and pick chains written (names.ts); 0 when absent. */
  readonly generation?: Generation;
}
