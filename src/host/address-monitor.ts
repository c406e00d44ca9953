// Says when the node's addresses may have changed, so that they are re-read then rather than
// polled: one long-lived `ip -o monitor label address route` whose lines are netlink events.
// An address event, or a change of a default route (which decides the primary addresses),
// asks for a re-read; other route events (a pod's route, say) are ignored. A line that is
// neither is counted and logged (at a decaying rate) and asks for a re-read too: better one
// read too many than a change missed.
//
// The child is supervised: when it exits or cannot start, that is logged and counted, and it is
// started again after a backoff. Every start asks for a re-read, since events may have been lost
// while no monitor ran. A monitor that runs but says nothing when it should (found by the watch's
// slow periodic re-read, see address-watch.ts) is restarted the same way.

import type { ChildProcess } from "node:child_process";
import type { Socket } from "node:net";
import { Backoff, type BackoffOptions } from "../lib/backoff.ts";
import { lineSplitter } from "../lib/line-splitter.ts";
import type { Clock } from "../model/clock.ts";
import type { Logger } from "../observability/log.ts";
import { counter } from "../observability/metrics.ts";
import { RepeatLimiter } from "../observability/repeat-limiter.ts";
import { spawnCommand, stopCommand } from "./exec.ts";

/** A source of "the addresses may have changed" (see HostAddressWatch). */
export interface AddressEvents {
  /** Starts telling `onEvent`; each call may stand for any number of changes. */
  start(onEvent: () => void): void;
  stop(): void;
  /** The watch found a change nothing told it of: the source is not to be trusted as it runs. */
  missed(): void;
}

/** One running monitor process, as the supervisor sees it. */
interface MonitorProcess {
  stop(): void;
}

/**
 * Starts a monitor: each line of its output goes to `onLine`, and `onExit` is called once when
 * it ends by itself (not after stop()) or cannot start, with why.
 */
export type StartMonitor = (onLine: (line: string) => void, onExit: (why: string) => void) => MonitorProcess;

const restarts = counter(
  "kpng_host_address_monitor_restarts_total",
  "Restarts of the monitor of the node's addresses (ip monitor), by why it stopped: exited, or missed a change.",
  ["reason"],
);

const unrecognized = counter(
  "kpng_host_address_monitor_unrecognized_lines_total",
  "Lines of ip monitor that are neither an address nor a route event (each asks for a re-read).",
);

type LineKind = "address" | "default-route" | "other-route" | "unrecognized";

/** What one line of `ip -o monitor label address route` is about. */
export function monitorLineKind(line: string): LineKind {
  if (line.startsWith("[ADDR]")) return "address";
  if (line.startsWith("[ROUTE]")) {
    const route = line.slice("[ROUTE]".length).replace(/^Deleted /, "");
    return /^default\b/.test(route) ? "default-route" : "other-route";
  }
  return "unrecognized";
}

/** After this long running, a monitor that exits is restarted after the shortest backoff again. */
const STABLE_MS = 60_000;
const RESTART_BACKOFF: BackoffOptions = { initialMs: 1000, maxMs: 60_000, jitter: 0.2 };

interface AddressMonitorOptions {
  readonly start: StartMonitor;
  readonly clock: Clock;
  readonly log: Logger;
  readonly backoff?: BackoffOptions;
}

export class AddressMonitor implements AddressEvents {
  readonly #o: AddressMonitorOptions;
  readonly #backoff: Backoff;
  readonly #garbage: RepeatLimiter;
  #onEvent: (() => void) | undefined;
  #process: MonitorProcess | undefined;
  #startedAt = 0;
  #cancelRestart: (() => void) | undefined;
  /** Counts starts, so that a late exit of a replaced process is ignored. */
  #generation = 0;

  constructor(options: AddressMonitorOptions) {
    this.#o = options;
    this.#backoff = new Backoff(options.backoff ?? RESTART_BACKOFF);
    this.#garbage = new RepeatLimiter({ now: () => options.clock.now() });
    restarts.inc({ reason: "exited" }, 0);
    restarts.inc({ reason: "missed" }, 0);
    unrecognized.inc(0);
  }

  start(onEvent: () => void): void {
    if (this.#onEvent !== undefined) return;
    this.#onEvent = onEvent;
    this.#run();
  }

  stop(): void {
    this.#onEvent = undefined;
    this.#generation++;
    this.#cancelRestart?.();
    this.#cancelRestart = undefined;
    this.#process?.stop();
    this.#process = undefined;
  }

  missed(): void {
    if (this.#onEvent === undefined || this.#process === undefined) return;
    this.#ended("missed", "a change of the node's addresses came without an event");
  }

  #run(): void {
    const generation = ++this.#generation;
    this.#cancelRestart = undefined;
    this.#startedAt = this.#o.clock.now();
    this.#process = this.#o.start(
      (line) => {
        if (generation === this.#generation) this.#line(line);
      },
      (why) => {
        if (generation === this.#generation) this.#ended("exited", why);
      },
    );
    // Whatever changed while no monitor ran was not told.
    this.#onEvent?.();
  }

  #line(line: string): void {
    const kind = monitorLineKind(line);
    if (kind === "other-route") return;
    if (kind === "unrecognized") {
      unrecognized.inc();
      const decision = this.#garbage.hit("unrecognized");
      if (decision.log)
        this.#o.log.warn(
          { line: line.slice(0, 200), lines: decision.count },
          "ip monitor printed a line that is not an address or route event; re-reading the addresses",
        );
    }
    this.#onEvent?.();
  }

  #ended(reason: "exited" | "missed", why: string): void {
    this.#generation++;
    this.#process?.stop();
    this.#process = undefined;
    restarts.inc({ reason });
    if (this.#o.clock.now() - this.#startedAt >= STABLE_MS) this.#backoff.reset();
    const delayMs = this.#backoff.next();
    this.#o.log.warn(
      { reason: why, restartInMs: delayMs },
      "the monitor of the node's addresses stopped; restarting it (the addresses are still re-read periodically)",
    );
    this.#cancelRestart = this.#o.clock.after(delayMs, () => {
      if (this.#onEvent !== undefined) this.#run();
    });
  }
}

/** The longest line kept whole; a longer one is cut (it still counts as an event). */
const MAX_LINE = 64 * 1024;
/** How much of the monitor's stderr is kept to say why it ended. */
const MAX_STDERR = 4096;

/**
 * `ip -o monitor label address route`: one line per event, labelled `[ADDR]` or `[ROUTE]`. The
 * child does not keep kpng running (it is unref'd) and is killed with kpng (exec.ts).
 */
export const ipMonitor: StartMonitor = (onLine, onExit) => {
  let child: ChildProcess;
  let done = false;
  const exit = (why: string) => {
    if (done) return;
    done = true;
    onExit(why);
  };
  try {
    child = spawnCommand(["ip", "-o", "monitor", "label", "address", "route"], { stdin: "ignore" });
  } catch (e) {
    queueMicrotask(() => exit(String(e)));
    return {
      stop: () => {
        done = true;
      },
    };
  }
  const lines = lineSplitter((line) => {
    if (line !== "") onLine(line);
  }, MAX_LINE);
  let stderr = "";
  child.stdout?.setEncoding("utf8");
  child.stdout?.on("data", (chunk: string) => lines.push(chunk));
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-MAX_STDERR);
  });
  child.on("error", (e) => exit(`cannot run ip monitor: ${e.message}`));
  child.on("exit", (code, signal) =>
    exit(`ip monitor ended (${signal ?? `code ${code}`})${stderr.trim() === "" ? "" : `: ${stderr.trim()}`}`),
  );
  child.unref();
  for (const pipe of [child.stdout, child.stderr]) (pipe as Socket | null)?.unref?.();
  return {
    stop: () => {
      done = true;
      stopCommand(child);
    },
  };
};
