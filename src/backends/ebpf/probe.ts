// The eBPF backend's answer to "is everything still in place?": every map and program pinned and
// every hook attached to kpng's program. The shared sync loop runs it every second and triggers a
// full sync (which reloads and re-attaches what is missing) when it fails.

import type { RulesProbe } from "../../backend-core/rules-probe.ts";
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
