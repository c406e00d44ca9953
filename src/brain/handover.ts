// The handover of a Service relabelled from one service proxy name to another, when one brain
// serves several (proxy-name-view.ts): the losing view keeps the Service until the handover
// releases it, so that it is never served by neither backend.
// The gaining backend confirms: a release happens as soon as another backend reports a sync
// whose rules hold the Service in every family it needs. Both backends hold it only until the
// loser's next sync. The backends are those of one process (to-local), or those of one node
// watching the brain over the API (remote-handovers.ts), which report their syncs back.
// A gaining backend that never confirms (dead, failing, disconnected, or not serving that
// family) is waited for `fallbackMs` at most, one that does not report syncs at all (a client
// that predates the reports) `unconfirmedMs`: then the Service is released anyway, with a
// warning and a metric.

import type { Clock } from "../model/clock.ts";
import { systemClock } from "../model/clock.ts";
import type { IPFamily, Service } from "../model/kube.ts";
import type { ServiceLookup } from "../model/local.ts";
import type { Logger } from "../observability/log.ts";
import { counter } from "../observability/metrics.ts";
import { selectedByProxyName } from "./selection.ts";

const fallbacks = counter(
  "kpng_handover_fallbacks_total",
  "Relabelled Services released by the losing backend without the gaining one confirming a sync that holds them.",
  ["service_proxy_name"],
);

/** What a view asks of the handover of a Service it lost. */
export interface Handover {
  /** The view of `from` no longer selects `service` (`key`): call `release` when it may drop it. */
  begin(key: string, from: string, service: Service, release: () => void): void;
  /** The handover of `key` by `from` is moot (relabelled back, deleted). */
  cancel(key: string, from: string): void;
}

/** Whether a Service ever reaches a backend's rules (headless and ExternalName ones do not). */
function programmable(service: Service): boolean {
  return service.type !== "ExternalName" && service.clusterIP !== "" && service.clusterIP !== "None";
}

interface Pending {
  readonly key: string;
  readonly from: string;
  readonly release: () => void;
  cancelTimer: () => void;
  /** Families some other backend confirmed, by backend. */
  readonly confirmed: Map<string, Set<IPFamily>>;
}

interface ConfirmedHandoverOptions {
  /**
   * The backends here, by service proxy name: whether each reports its syncs. Read at each
   * handover's start, so the owner may add and remove backends as they come and go.
   */
  readonly backends: ReadonlyMap<string, boolean>;
  /** Longest wait for a confirmation. */
  readonly fallbackMs: number;
  /** The wait when a gaining backend does not report its syncs (default: fallbackMs). */
  readonly unconfirmedMs?: number;
  readonly log: Logger;
  readonly clock?: Clock;
}

export class ConfirmedHandover implements Handover {
  readonly #o: ConfirmedHandoverOptions & { clock: Clock };
  readonly #pending = new Map<string, Pending>();
  /** The families each backend has ever reported programmed: what it serves. */
  readonly #families = new Map<string, Set<IPFamily>>();

  constructor(options: ConfirmedHandoverOptions) {
    this.#o = { ...options, clock: options.clock ?? systemClock };
  }

  get #unconfirmedMs(): number {
    return Math.min(this.#o.unconfirmedMs ?? this.#o.fallbackMs, this.#o.fallbackMs);
  }

  begin(key: string, from: string, service: Service, release: () => void): void {
    const id = `${from}\0${key}`;
    if (this.#pending.has(id)) return;
    // Nothing to hand over: no rules hold it, or no backend here takes it (it leaves this node's
    // proxies, as with any proxy name nobody here serves).
    const gainers = [...this.#o.backends].filter(
      ([n]) => n !== from && selectedByProxyName(service.metadata.labels, n),
    );
    if (!programmable(service) || gainers.length === 0) {
      release();
      return;
    }
    const to = gainers.map(([n]) => n);
    const started = this.#o.clock.now();
    // A gainer not known to report syncs gets the short wait; one that turns out to report them
    // meanwhile (its first report raced the relabel) gets the rest of the full one.
    const silentGainers = () => to.filter((n) => this.#o.backends.get(n) !== true);
    const wait = () => (silentGainers().length > 0 ? this.#unconfirmedMs : this.#o.fallbackMs);
    const expire = () => {
      const waited = this.#o.clock.now() - started;
      const p = this.#pending.get(id);
      if (p === undefined) return;
      if (waited < wait()) {
        p.cancelTimer = this.#o.clock.after(wait() - waited, expire);
        return;
      }
      this.#pending.delete(id);
      for (const gainer of to) fallbacks.inc({ service_proxy_name: gainer });
      const silent = silentGainers();
      this.#o.log.warn(
        {
          service: key,
          from,
          to,
          waitedMs: waited,
          ...(silent.length > 0 ? { reportingNoSyncs: silent } : {}),
        },
        silent.length > 0
          ? "the backend gaining a relabelled Service reports no syncs (a client that predates sync reports); the losing backend drops it after a fixed wait"
          : "the backend gaining a relabelled Service did not confirm a sync holding it; the losing backend drops it anyway",
      );
      release();
    };
    const cancelTimer = this.#o.clock.after(wait(), expire);
    this.#pending.set(id, { key, from, release, cancelTimer, confirmed: new Map() });
  }

  cancel(key: string, from: string): void {
    const id = `${from}\0${key}`;
    this.#pending.get(id)?.cancelTimer();
    this.#pending.delete(id);
  }

  /** The backend of `name` synced a state holding `services` into its rules of `families`. */
  programmed(name: string, services: ServiceLookup, families: readonly IPFamily[]): void {
    let known = this.#families.get(name);
    if (known === undefined) {
      known = new Set();
      this.#families.set(name, known);
    }
    for (const f of families) known.add(f);
    for (const [id, p] of this.#pending) {
      if (p.from === name) continue;
      const service = services.get(p.key);
      if (service === undefined) continue;
      let confirmed = p.confirmed.get(name);
      if (confirmed === undefined) {
        confirmed = new Set();
        p.confirmed.set(name, confirmed);
      }
      for (const f of families) confirmed.add(f);
      // Every family of the Service that this backend serves.
      const needed = new Set(service.families.map((f) => f.family));
      const done = [...needed].every((f) => confirmed.has(f) || !known.has(f));
      if (!done) continue;
      p.cancelTimer();
      this.#pending.delete(id);
      p.release();
    }
  }
}
