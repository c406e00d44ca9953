// The eBPF backend's answer to "is everything still in place?" for one IP family: every map and
// program pinned, every hook attached to kpng's program, and the maps the family last wrote still
// the pinned ones (maps re-created while the other family was repaired hold none of its entries).
// The shared sync loop asks for each family every second and triggers a full sync (which reloads
// and re-attaches what is missing) when the answer is no. The families of one round share one
// look at the kernel (one bpftool call).

import type { RulesProbe } from "../../backend-core/rules-probe.ts";
import type { Logger } from "../../observability/log.ts";
import type { ProgramLoader } from "./programs.ts";

/** A look at the kernel serves the other families' questions for this long, once each. */
const SHARED_FOR_MS = 500;

interface EbpfProbeOptions {
  /** Whether the maps were re-created since `family` last wrote them. */
  readonly stale?: (family: string) => boolean;
  readonly now?: () => number;
}

export class EbpfProbe implements RulesProbe {
  readonly #loader: ProgramLoader;
  readonly #log: Logger;
  readonly #stale: (family: string) => boolean;
  readonly #now: () => number;
  #check:
    | { readonly at: number; readonly problems: Promise<string[]>; readonly asked: Set<string> }
    | undefined;

  constructor(loader: ProgramLoader, log: Logger, options: EbpfProbeOptions = {}) {
    this.#loader = loader;
    this.#log = log;
    this.#stale = options.stale ?? (() => false);
    this.#now = options.now ?? Date.now;
  }

  async intact(family: string): Promise<boolean> {
    const problems = await this.#problems(family);
    if (problems.length > 0) return false;
    if (!this.#stale(family)) return true;
    this.#log.warn({ family }, "the BPF maps were re-created after this family was written");
    return false;
  }

  #problems(family: string): Promise<string[]> {
    const t = this.#now();
    const shared = this.#check;
    if (shared !== undefined && t - shared.at <= SHARED_FOR_MS && !shared.asked.has(family)) {
      shared.asked.add(family);
      return shared.problems;
    }
    const problems = this.#loader.check().then((found) => {
      if (found.length > 0) this.#log.warn({ problems: found }, "BPF pins or attachments missing");
      return found;
    });
    this.#check = { at: t, problems, asked: new Set([family]) };
    return problems;
  }
}
