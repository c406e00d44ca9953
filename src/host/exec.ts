// The one way kpng runs a command: an argv array (never a shell), data on stdin, output
// collected, and a deadline after which the command's whole process group is killed. Runners for
// nft, iptables, conntrack, ip and the cleanup tools build on it and decide what a failure means
// for them.
//
// Every command runs in a process group of its own (spawned detached), so that a kill reaches
// the children it started too: a grandchild holding the pipes must not hold kpng. A call never
// waits past its deadline, even for pipes that something outside the group still holds. A
// command that cannot start for want of resources (EMFILE, ENFILE, EAGAIN, ENOMEM) is retried with
// backoff within the deadline; every start failure is logged by the caller and counted here.
// Whatever runs when kpng exits is killed then: no command outlives kpng. Commands get kpng's
// environment, with malloc on huge pages (huge-page-malloc.ts).

import { type ChildProcess, spawn } from "node:child_process";
import { getPriority, setPriority } from "node:os";
import { basename } from "node:path";
import { type AnswerDeadline, answerDeadline } from "../lib/answer-deadline.ts";
import { counter } from "../observability/metrics.ts";
import { withHugePageMalloc } from "./huge-page-malloc.ts";

/** A command that ran and failed: the message says what, `stderr` keeps the tool's own words. */
export class CommandFailed extends Error {
  readonly stderr: string;
  constructor(message: string, stderr = "") {
    super(message);
    this.name = new.target.name;
    this.stderr = stderr;
  }
}

/** The first non-blank line of a tool's output, for a one-line error message. */
export function firstLine(text: string): string {
  return text.split("\n").find((l) => l.trim() !== "") ?? "unknown error";
}

export interface ExecResult {
  /** The exit code; 1 when the process ended by a signal. */
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  /** The signal that ended the process, if one did. */
  readonly signal: NodeJS.Signals | null;
  /** The deadline passed and the process group was killed. */
  readonly timedOut: boolean;
}

interface ExecOptions {
  readonly stdin?: string;
  readonly timeoutMs: number;
  /** Told of the child once it runs and once it is gone (e.g. to stop it at shutdown). */
  readonly track?: { add(child: ChildProcess): void; delete(child: ChildProcess): void };
  /** Called with each stdout chunk instead of collecting it (stdout is then ""). */
  readonly onStdout?: (chunk: Buffer) => void;
  /** An open file the command writes its output into, instead of a pipe (stdout is then ""). */
  readonly stdoutFd?: number;
  /**
   * Runs the command at least this nice (background work: it then takes the CPU only when the
   * proxy's own work does not want it). Set before anything is written to its stdin.
   */
  readonly niceness?: number;
  /** Told of each start that failed (its errno name), besides the count here. */
  readonly onSpawnFailure?: (code: string) => void;
}

const spawnFailures = counter(
  "kpng_exec_spawn_failures_total",
  "External commands that could not be started, by command and error code (retried when transient).",
  ["command", "code"],
);

const timeouts = counter(
  "kpng_exec_timeouts_total",
  "External commands killed (with their process group) because their deadline passed.",
  ["command"],
);

/** Start failures that go away when descriptors, processes or memory are freed. */
const TRANSIENT = new Set(["EMFILE", "ENFILE", "EAGAIN", "ENOMEM"]);
const FIRST_RETRY_MS = 50;
const MAX_RETRY_MS = 2000;

/**
 * Counts a start of `argv` that failed with `spawnFailure`, or a deadline that passed: execCommand's
 * own, and those of commands another process ran for this one (the small spawner's).
 */
export function countExec(
  argv: readonly string[],
  what: { readonly spawnFailure: string } | { readonly timedOut: true },
): void {
  const command = basename(argv[0] ?? "");
  if ("timedOut" in what) timeouts.inc({ command });
  else spawnFailures.inc({ command, code: what.spawnFailure });
}

/** Why a command did not start; `code` is the errno name (ENOENT, EMFILE, …). */
class SpawnError extends Error {
  readonly code: string;
  constructor(command: string, code: string, message: string) {
    super(`cannot start ${command}: ${message}`);
    this.name = "SpawnError";
    this.code = code;
  }
}

/** Every command running now, with the function that kills its group and ends its call. */
const live = new Map<ChildProcess, () => void>();

/** Kills the process group `group` (a command and whatever it started); false when there is none. */
export function killProcessGroup(group: number): boolean {
  try {
    process.kill(-group, "SIGKILL");
    return true;
  } catch {
    return false;
  }
}

/** Kills the child's process group (the child and whatever it started). */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  // The group is gone already, or the child never made one: kill the child itself.
  if (!killProcessGroup(child.pid)) child.kill("SIGKILL");
}

/** Kills one running command's process group and ends its call at once (it fails). */
export function stopCommand(child: ChildProcess): void {
  const stop = live.get(child);
  if (stop) stop();
  else killGroup(child);
}

/** Kills every running command's process group (at shutdown); returns how many there were. */
export function stopAllCommands(): number {
  const stops = [...live.values()];
  for (const stop of stops) stop();
  return stops.length;
}

// Synchronous, so it runs on every exit path, process.exit() included.
process.on("exit", () => {
  for (const child of live.keys()) killGroup(child);
});

/**
 * Spawns argv in a process group of its own, tracked until it exits, with `error` handled before
 * anything else. `onStop` is called when stopCommand() or stopAllCommands() kills it. Throws
 * SpawnError when the command cannot start synchronously; an asynchronous start failure comes
 * as the child's `error` event.
 */
export function spawnCommand(
  argv: readonly string[],
  options: { readonly stdin: "pipe" | "ignore"; readonly stdout?: number; readonly onStop?: () => void },
): ChildProcess {
  const [cmd = "", ...args] = argv;
  let child: ChildProcess;
  try {
    child = spawn(cmd, args, {
      stdio: [options.stdin, options.stdout ?? "pipe", "pipe"],
      detached: true,
      env: withHugePageMalloc(process.env),
    });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw new SpawnError(cmd, err.code ?? "EUNKNOWN", err.message);
  }
  const forget = () => live.delete(child);
  child.on("error", forget);
  child.on("exit", forget);
  if (child.pid !== undefined) {
    live.set(child, () => {
      forget();
      killGroup(child);
      options.onStop?.();
    });
  }
  // A failing process may close stdin early or never open its pipes: `exit`/`error` report it.
  child.stdin?.on("error", () => {});
  return child;
}

/** Best effort: a process that is gone already, or a refused change, leaves it as it is. */
function lowerPriority(pid: number, niceness: number): void {
  try {
    setPriority(pid, Math.max(getPriority(), niceness));
  } catch {}
}

function once(argv: readonly string[], options: ExecOptions): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const command = basename(argv[0] ?? "");
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let settled = false;
    let child: ChildProcess | undefined;
    let deadline: AnswerDeadline | undefined;
    const finish = (result: ExecResult | Error) => {
      if (settled) return;
      settled = true;
      deadline?.clear();
      if (child) {
        options.track?.delete(child);
        live.delete(child);
        // Pipes that a stray process still holds must not keep kpng's handles open.
        child.stdout?.destroy();
        child.stderr?.destroy();
        child.stdin?.destroy();
      }
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    const killed = (timedOut: boolean) => {
      if (child) killGroup(child);
      finish({
        code: 1,
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString(),
        signal: "SIGKILL",
        timedOut,
      });
    };
    try {
      child = spawnCommand(argv, {
        stdin: "pipe",
        ...(options.stdoutFd === undefined ? {} : { stdout: options.stdoutFd }),
        onStop: () => killed(false),
      });
    } catch (e) {
      finish(e as Error);
      return;
    }
    const c = child;
    c.on("error", (e: NodeJS.ErrnoException) => {
      // Before the process runs (no pid) this is a start failure; after, a pipe or kill error
      // that `close` or the deadline also reports.
      if (c.pid === undefined) finish(new SpawnError(command, e.code ?? "EUNKNOWN", e.message));
    });
    if (c.pid === undefined) return; // the `error` event follows
    options.track?.add(c);
    if (options.niceness !== undefined) lowerPriority(c.pid, options.niceness);
    deadline = answerDeadline(
      options.timeoutMs,
      () => {
        timeouts.inc({ command });
        killed(true);
      },
      // It exited: its output and its pipes' ends are being read.
      () => c.exitCode !== null || c.signalCode !== null,
    );
    c.stdout?.on("data", options.onStdout ?? ((b: Buffer) => out.push(b)));
    c.stderr?.on("data", (b: Buffer) => err.push(b));
    c.on("close", (code, signal) =>
      finish({
        code: code ?? 1,
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString(),
        signal,
        timedOut: false,
      }),
    );
    c.stdin?.end(options.stdin ?? "");
  });
}

/**
 * Runs argv to completion within `timeoutMs`. Rejects with SpawnError only when the command
 * cannot start (not installed, or still out of resources when the deadline comes).
 */
export async function execCommand(argv: readonly string[], options: ExecOptions): Promise<ExecResult> {
  const deadline = performance.now() + options.timeoutMs;
  let delay = FIRST_RETRY_MS;
  for (;;) {
    const left = Math.max(1, Math.round(deadline - performance.now()));
    try {
      return await once(argv, { ...options, timeoutMs: left });
    } catch (e) {
      if (!(e instanceof SpawnError)) throw e;
      countExec(argv, { spawnFailure: e.code });
      options.onSpawnFailure?.(e.code);
      if (!TRANSIENT.has(e.code) || performance.now() + delay >= deadline) throw e;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, MAX_RETRY_MS);
    }
  }
}
