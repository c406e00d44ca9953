// Follows the node's own addresses while kpng runs: interfaces gain and lose addresses (DHCP,
// a second NIC, a VIP moved by keepalived), and the rules that depend on them must follow, as
// kube-proxy's do (iptables matches `addrtype LOCAL`, nftables mode recomputes the NodePort
// addresses at every sync).
//
// Each read is the whole truth (`ip -j addr show`, with a deadline), so nothing is lost when a
// read fails. When to read is told by events (address-monitor.ts: a long-lived `ip monitor`),
// debounced, so that an idle node costs no command at all; a slow periodic re-read is the safety
// net for a monitor that dies or misses an event. Without events, the periodic re-read alone
// follows the addresses (within one period). A read that fails or passes its deadline is logged
// (at a decaying rate) and counted; the last good addresses stay in use.

import { type Clock, systemClock } from "../model/clock.ts";
import type { Logger } from "../observability/log.ts";
import { counter } from "../observability/metrics.ts";
import { RepeatLimiter } from "../observability/repeat-limiter.ts";
import { type AddressEvents, AddressMonitor, ipMonitor } from "./address-monitor.ts";
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

/** One read of the node's addresses; `routes` asks for the default routes to be read too. */
type ReadAddresses = (routes?: boolean) => Promise<HostAddresses>;

/**
 * A reader of the node's addresses: `ip -j addr show` at each read; the default routes (two more
 * commands, which say which interfaces hold the primary addresses) at the first read, when asked
 * (a route event), when the addresses changed, and every ROUTES_EVERY reads, so that a periodic
 * read costs about one command while a default route moving to another interface is still seen.
 */
export function hostAddressReader(host: HostNetwork): ReadAddresses {
  let routes: string[] | undefined;
  let lastAll: string | undefined;
  let reads = 0;
  return async (readRoutes = false) => {
    const ifs = await host.interfaces();
    const all = ifs.flatMap((i) => i.addresses.map((a) => a.ip));
    const key = all.join(",");
    if (readRoutes || routes === undefined || key !== lastAll || reads % ROUTES_EVERY === 0)
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

/** How often the node's addresses are re-read without events. */
const ADDRESS_POLL_MS = 5000;
/** How often they are re-read with events: the safety net for an event missed. */
const SAFETY_POLL_MS = 60_000;
/** Events this close together make one read (a new interface brings several at once). */
const EVENT_DEBOUNCE_MS = 250;
/** The deadline of one re-read; `ip` answers in milliseconds when all is well. */
const READ_TIMEOUT_MS = 5000;

const sameAddresses = (a: HostAddresses, b: HostAddresses) =>
  a.all.join(",") === b.all.join(",") && a.primary.join(",") === b.primary.join(",");

interface HostAddressWatchOptions {
  /**
   * One read of the addresses. A read that passes the deadline is not waited for (its commands
   * end at their own deadlines, see host-network.ts) and its answer is ignored.
   */
  readonly read: ReadAddresses;
  /** The addresses read at start. */
  readonly initial: HostAddresses;
  readonly clock: Clock;
  readonly log: Logger;
  /** Says when to read; without it, the periodic re-read alone follows the addresses. */
  readonly events?: AddressEvents;
  /** The period of re-reads: ADDRESS_POLL_MS, or SAFETY_POLL_MS with events. */
  readonly intervalMs?: number;
  readonly timeoutMs?: number;
  readonly debounceMs?: number;
}

type Listener = (now: HostAddresses, was: HostAddresses) => void;

export class HostAddressWatch {
  readonly #o: Required<Omit<HostAddressWatchOptions, "events">>;
  readonly #events: AddressEvents | undefined;
  readonly #listeners = new Set<Listener>();
  readonly #repeats: RepeatLimiter;
  #current: HostAddresses;
  #cancel: (() => void) | undefined;
  #stopped = true;
  #failing = false;
  #cancelEventRead: (() => void) | undefined;
  /** An event came since the last read started: a change it finds was told. */
  #told = false;
  /** The read running now, and whether another (with the routes?) is to follow it. */
  #reading: Promise<boolean> | undefined;
  #again: { routes: boolean } | undefined;

  constructor(options: HostAddressWatchOptions) {
    this.#o = {
      intervalMs: options.events === undefined ? ADDRESS_POLL_MS : SAFETY_POLL_MS,
      timeoutMs: READ_TIMEOUT_MS,
      debounceMs: EVENT_DEBOUNCE_MS,
      ...options,
    };
    this.#events = options.events;
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
    this.#events?.start(() => this.#event());
    return this;
  }

  stop(): void {
    this.#stopped = true;
    this.#events?.stop();
    this.#cancel?.();
    this.#cancel = undefined;
    this.#cancelEventRead?.();
    this.#cancelEventRead = undefined;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#cancel = this.#o.clock.after(
      this.#o.intervalMs,
      () => void this.#read(false).finally(() => this.#schedule()),
    );
  }

  #event(): void {
    this.#told = true;
    if (this.#stopped || this.#cancelEventRead !== undefined) return;
    this.#cancelEventRead = this.#o.clock.after(this.#o.debounceMs, () => {
      this.#cancelEventRead = undefined;
      void this.#read(true);
    });
  }

  /** One read at a time: a read asked for while one runs follows it. */
  async #read(fromEvent: boolean): Promise<void> {
    if (this.#reading !== undefined) {
      this.#again = { routes: fromEvent || this.#again?.routes === true };
      await this.#reading;
      return;
    }
    let routes = fromEvent;
    for (;;) {
      const told = this.#told;
      this.#told = false;
      this.#reading = this.poll(routes);
      const changed = await this.#reading.finally(() => {
        this.#reading = undefined;
      });
      // An event during the read may stand for the change it found: not a miss.
      if (changed && !told && !this.#told && !routes) this.#events?.missed();
      const again = this.#again;
      this.#again = undefined;
      if (again === undefined || this.#stopped) return;
      routes = again.routes;
    }
  }

  /**
   * One re-read (`routes`: the default routes too); never throws; resolves to whether the
   * addresses changed. Exposed for tests and for a read on demand.
   */
  async poll(routes = false): Promise<boolean> {
    let cancelDeadline: () => void = () => {};
    const deadline = new Promise<"timeout">((resolve) => {
      cancelDeadline = this.#o.clock.after(this.#o.timeoutMs, () => resolve("timeout"));
    });
    let result: HostAddresses | "timeout";
    try {
      result = await Promise.race([this.#o.read(routes), deadline]);
    } catch (err) {
      this.#failed("error", String(err));
      return false;
    } finally {
      cancelDeadline();
    }
    if (result === "timeout") {
      this.#failed("timeout", `no answer within ${this.#o.timeoutMs} ms`);
      return false;
    }
    if (this.#failing) {
      this.#failing = false;
      this.#repeats.reset();
      this.#o.log.info("the node's addresses can be read again");
    }
    const was = this.#current;
    if (sameAddresses(was, result)) return false;
    this.#current = result;
    for (const listener of this.#listeners) listener(result, was);
    return true;
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

/**
 * Reads the node's addresses now, then again at each `ip monitor` event and every
 * SAFETY_POLL_MS, until `stop()`.
 */
export async function watchHostAddresses(
  host: HostNetwork,
  log: Logger,
  clock: Clock = systemClock,
): Promise<HostAddressWatch> {
  const read = hostAddressReader(host);
  const events = new AddressMonitor({ start: ipMonitor, clock, log });
  return new HostAddressWatch({ read, initial: await read(), clock, log, events }).start();
}
