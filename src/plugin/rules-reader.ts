// What `kpng explain --rules` asks of a backend: the kernel objects that implement one Service on
// this node, read from the kernel, and where they differ from what the backend would program for
// the brain's state of that Service (a drift check). One small reader per backend.

import type { LocalService } from "../model/local.ts";

/** One kernel object, as the backend's own tool shows it (an nft chain, a map element, an iptables rule). */
interface KernelObject {
  /** e.g. "nft chain", "nft map element", "iptables chain". */
  readonly kind: string;
  /** Where it lives: "ip kpng svc-…", "nat KPNG-SVC-…". */
  readonly name: string;
  /** The object as read from the kernel, one line per rule or element. */
  readonly lines: readonly string[];
}

/** One difference between the kernel and what the brain computed. */
interface Drift {
  readonly object: string;
  /** What the backend would program ("" when the object should not exist). */
  readonly expected: string;
  /** What the kernel holds ("" when the object is missing). */
  readonly found: string;
}

export interface RulesReport {
  readonly backend: string;
  readonly objects: readonly KernelObject[];
  readonly drift: readonly Drift[];
}

export interface RulesReader {
  /**
   * Reads only the kernel objects of `service` (never a whole table: at 100k Services that is
   * minutes of output) and compares them with what the backend renders for it.
   */
  read(service: LocalService, signal: AbortSignal): Promise<RulesReport>;
}
