// Follows the node's own addresses while kpng runs: interfaces gain and lose addresses (DHCP,
// a second NIC, a VIP moved by keepalived), and the rules that depend on them must follow, as
// kube-proxy's do (iptables matches `addrtype LOCAL`, nftables mode recomputes the NodePort
// addresses at every sync).
//
// A periodic re-read (`ip -j addr show`, with a deadline) rather than a long-lived
// `ip monitor address`: a re-read is the truth whatever happened in between, so nothing is lost
// when a read fails or `ip` is restarted, there is no child to supervise, and the cost is about
// one short command per period (bench/address-watch.ts). A change is seen within one period.
// A read that fails or passes its deadline is logged (at a decaying rate) and counted; the
// last good addresses stay in use.

import { type Clock, systemClock } from "../model/clock.ts";
import type { Logger } from "../observability/log.ts";
import { counter } from "../observability/metrics.ts";
import { RepeatLimiter } from "../observability/repeat-limiter.ts";
import { type HostNetwork, primaryAddresses } from "./host-network.ts";

/** The node's addresses as the rules see them. */
export interface HostAddresses {
  /** Every address of every interface, loopback included, in the order `ip` lists them. */
  readonly all: readonly string[];
  /** The addresses of the default-route interfaces (see primaryAddresses); empty unless read. */
  readonly primary: readonly string[];
}

/** Every how many reads the default routes are read again when no address changed. */
const ROUTES_EVERY = 6;

/**
 * A reader of the node's addresses: `ip -j addr show` at each read; the default routes (two more
 * commands, which say which interfaces hold the primary addresses) at the first read, when the
 * addresses changed, and every ROUTES_EVERY reads, so that the idle cost is about one command
 * per read while a default route moving to another interface is still seen.
 */
export function hostAddressReader(host: HostNetwork): () => Promise<HostAddresses> {
  let routes: string[] | undefined;
  let lastAll: string | undefined;
  let reads = 0;
  return async () => {
    const ifs = await host.interfaces();
    const all = ifs.flatMap((i) => i.addresses.map((a) => a.ip));
    const key = all.join(",");
    if (routes === undefined || key !== lastAll || reads % ROUTES_EVERY === 0)
      routes = await host.defaultRouteInterfaces();
    reads++;
    lastAll = key;
    return { all, primary: primaryAddresses(routes, ifs) };
  };
}

const readFailures = counter(
  "kpng_host_address_read_failures_total",
  "Re-reads of the node's addresses that failed or passed their deadline (the last good addresses stay in use).",
  ["reason"],
);

/** How often the node's addresses are re-read. */
const ADDRESS_POLL_MS = 5000;
/** The deadline of one re-read; `ip` answers in milliseconds when all is well. */
const READ_TIMEOUT_MS = 5000;

const sameAddresses = (a: HostAddresses, b: HostAddresses) =>
  a.all.join(",") === b.all.join(",") && a.primary.join(",") === b.primary.join(",");

interface HostAddressWatchOptions {
  /**
   * One read of the addresses. A read that passes the deadline is not waited for (its commands
   * end at their own deadlines, see host-network.ts) and its answer is ignored.
   */
  readonly read: () => Promise<HostAddresses>;
  /** The addresses read at start. */
  readonly initial: HostAddresses;
  readonly clock: Clock;
  readonly log: Logger;
  readonly intervalMs?: number;
  readonly timeoutMs?: number;
}

type Listener = (now: HostAddresses, was: HostAddresses) => void;

export class HostAddressWatch {
  readonly #o: Required<HostAddressWatchOptions>;
  readonly #listeners = new Set<Listener>();
  readonly #repeats: RepeatLimiter;
  #current: HostAddresses;
  #cancel: (() => void) | undefined;
  #stopped = true;
  #failing = false;

  constructor(options: HostAddressWatchOptions) {
    this.#o = { intervalMs: ADDRESS_POLL_MS, timeoutMs: READ_TIMEOUT_MS, ...options };
    this.#current = options.initial;
    this.#repeats = new RepeatLimiter({ now: () => options.clock.now() });
    readFailures.inc({ reason: "error" }, 0);
    readFailures.inc({ reason: "timeout" }, 0);
  }

  /** The last good addresses. */
  get current(): HostAddresses {
    return this.#current;
  }

  /** Calls `listener` after each change, with the new and the previous addresses. */
  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  start(): this {
    if (!this.#stopped) return this;
    this.#stopped = false;
    this.#schedule();
    return this;
  }

  stop(): void {
    this.#stopped = true;
    this.#cancel?.();
    this.#cancel = undefined;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#cancel = this.#o.clock.after(
      this.#o.intervalMs,
      () => void this.poll().finally(() => this.#schedule()),
    );
  }

  /** One re-read; never throws. Exposed for tests and for a read on demand. */
  async poll(): Promise<void> {
    let cancelDeadline: () => void = () => {};
    const deadline = new Promise<"timeout">((resolve) => {
      cancelDeadline = this.#o.clock.after(this.#o.timeoutMs, () => resolve("timeout"));
    });
    let result: HostAddresses | "timeout";
    try {
      result = await Promise.race([this.#o.read(), deadline]);
    } catch (err) {
      this.#failed("error", String(err));
      return;
    } finally {
      cancelDeadline();
    }
    if (result === "timeout") {
      this.#failed("timeout", `no answer within ${this.#o.timeoutMs} ms`);
      return;
    }
    if (this.#failing) {
      this.#failing = false;
      this.#repeats.reset();
      this.#o.log.info("the node's addresses can be read again");
    }
    const was = this.#current;
    if (sameAddresses(was, result)) return;
    this.#current = result;
    for (const listener of this.#listeners) listener(result, was);
  }

  #failed(reason: "error" | "timeout", message: string): void {
    readFailures.inc({ reason });
    this.#failing = true;
    const decision = this.#repeats.hit(reason + message);
    if (!decision.log) return;
    this.#o.log.warn(
      {
        err: message,
        failures: decision.count,
        ...(decision.suppressed > 0 && { suppressedRepeats: decision.suppressed }),
      },
      "cannot re-read the node's addresses; keeping the last ones read",
    );
  }
}

/** Reads the node's addresses now, then re-reads them every ADDRESS_POLL_MS until `stop()`. */
export async function watchHostAddresses(
  host: HostNetwork,
  log: Logger,
  clock: Clock = systemClock,
): Promise<HostAddressWatch> {
  const read = hostAddressReader(host);
  return new HostAddressWatch({ read, initial: await read(), clock, log }).start();
}
