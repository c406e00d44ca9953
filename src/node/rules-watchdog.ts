// Notices when another program deletes or flushes the proxy's rules (`nft flush ruleset`, an
// `iptables -F`, a firewall reload) and asks the backend for a full resync at once, rather than
// at the next periodic resync. The probe is the backend's: a cheap look at one object that is
// always there once a sync succeeded.

import { Counter } from "prom-client";
import type { Logger } from "../observability/log.ts";
import { registry } from "../observability/metrics.ts";

const repairs = new Counter({
  name: "kpng_rules_repairs_total",
  help: "Times the proxy's rules were found deleted or flushed by someone else and rewritten.",
  registers: [registry],
});

const probeFailures = new Counter({
  name: "kpng_rules_probe_failures_total",
  help: "Checks of the proxy's rules that could not run (timeout, tool error).",
  registers: [registry],
});

export interface RulesProbe {
  /** True when the rules are in place; rejects when it cannot tell. */
  intact(): Promise<boolean>;
}

interface RulesWatchdogOptions {
  readonly probe: RulesProbe;
  readonly repair: () => void;
  readonly intervalMs: number;
  readonly log: Logger;
}

export class RulesWatchdog {
  readonly #o: RulesWatchdogOptions;
  /** Only a table that a sync has written can be missing. */
  #armed = false;

  constructor(options: RulesWatchdogOptions) {
    this.#o = options;
  }

  /** A sync succeeded: from now on the rules must be there. */
  arm(): void {
    this.#armed = true;
  }

  /** One check; returns true when it asked for a repair. */
  async check(): Promise<boolean> {
    if (!this.#armed) return false;
    let ok: boolean;
    try {
      ok = await this.#o.probe.intact();
    } catch (err) {
      probeFailures.inc();
      this.#o.log.warn({ err: String(err) }, "cannot check the rules");
      return false;
    }
    if (ok) return false;
    // Disarmed until the repair sync succeeds, so one flush is one repair.
    this.#armed = false;
    repairs.inc();
    this.#o.log.warn("the rules were deleted or flushed by another program; rewriting them");
    this.#o.repair();
    return true;
  }

  /** Checks every intervalMs until signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.#o.intervalMs);
        signal.addEventListener(
          "abort",
          () => {
            clearTimeout(timer);
            resolve();
          },
          { once: true },
        );
      });
      if (!signal.aborted) await this.check();
    }
  }
}
