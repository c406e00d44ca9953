// The eBPF backend's answer to "is everything still in place?": every map and program pinned and
// every hook attached to kpng's program. The node services' watchdog runs it every second and
// triggers a full sync (which reloads and re-attaches what is missing) when it fails.

import type { RulesProbe } from "../../node/rules-watchdog.ts";
import type { Logger } from "../../observability/log.ts";
import type { ProgramLoader } from "./programs.ts";

export class EbpfProbe implements RulesProbe {
  readonly #loader: ProgramLoader;
  readonly #log: Logger;

  constructor(loader: ProgramLoader, log: Logger) {
    this.#loader = loader;
    this.#log = log;
  }

  async intact(): Promise<boolean> {
    const problems = await this.#loader.check();
    if (problems.length > 0) this.#log.warn({ problems }, "BPF pins or attachments missing");
    return problems.length === 0;
  }
}

/** Intact only when every probe is. */
export function allOf(probes: readonly RulesProbe[]): RulesProbe {
  return {
    async intact() {
      const results = await Promise.all(probes.map((p) => p.intact()));
      return results.every(Boolean);
    },
  };
}
