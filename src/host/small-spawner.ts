// Commands started from a small process instead of the proxy itself. Node starts a command by
// forking, and a fork copies the page tables of the whole process: from a proxy with 100k
// Services each start blocks the event loop for tens of milliseconds (docs/performance.md), and a
// change that arrives meanwhile waits that long. Worse, the fork leaves every page of the proxy
// copy-on-write, so the next write to each one takes a page fault (docs/performance.md,
// "Commands that no longer fork a large kpng"). The small process (small-spawner-main.ts) is
// forked once, at start, while kpng is still small; the commands it runs for kpng cost kpng one
// IPC message.
//
// The same contract as execCommand: an argv array, a deadline, a result or a start failure.
// Nothing is written to their stdin: commands that need data get a file (sending the data over
// the IPC channel cost the small process as much as the forks it saved kpng; docs/nft.md). If the small process
// dies, the calls in flight fail, their commands are killed, and the next call starts it again;
// if it cannot start, or does not answer within the deadline (then it is killed with its
// commands), the command fails as a timed-out command would: a caller already handles that.

import { type ChildProcess, fork } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type AnswerDeadline, answerDeadline } from "../lib/answer-deadline.ts";
import { counter } from "../observability/metrics.ts";
import { countExec, type ExecResult, execCommand, killProcessGroup } from "./exec.ts";

export interface SpawnRequest {
  readonly id: number;
  readonly argv: readonly string[];
  readonly timeoutMs: number;
  readonly niceness?: number;
  /** The command's output goes into this new file (the result's stdout is then ""). */
  readonly stdoutFile?: string;
}

export type SpawnResponse =
  /** The command runs, in the process group `started` (sent before its result). */
  | { readonly id: number; readonly started: number }
  /** A start failed with this errno name (it may be retried): for kpng's metrics. */
  | { readonly id: number; readonly spawnFailure: string }
  | { readonly id: number; readonly result: ExecResult }
  | { readonly id: number; readonly error: string };

const restarts = counter(
  "kpng_small_spawner_restarts_total",
  "Times the small process that starts commands for kpng (conntrack, nft -f, bpftool, ip) was started again after it died or hung.",
);

const MAIN = fileURLToPath(new URL("./small-spawner-main.ts", import.meta.url));
/** How long past a command's own deadline its answer may take before the small process is killed. */
const ANSWER_GRACE_MS = 5000;

interface Waiting {
  readonly child: ChildProcess;
  readonly argv: readonly string[];
  /** The process groups of the call's command: killed with the small process, not orphaned. */
  readonly groups: Set<number>;
  readonly resolve: (r: ExecResult) => void;
  readonly reject: (e: Error) => void;
  readonly deadline: AnswerDeadline;
}

let shared: SmallSpawner | undefined;

/** argv run to completion by `spawner` when there is one, else by kpng itself (execCommand). */
export function execVia(
  spawner: SmallSpawner | undefined,
  argv: readonly string[],
  options: { readonly timeoutMs: number },
): Promise<ExecResult> {
  return spawner === undefined ? execCommand(argv, options) : spawner.exec(argv, options);
}

/**
 * argv run to completion with `input`: by `spawner`, when there is one, the input in a file named
 * as its last argument (withInputFile); else, or when the file cannot be written, by kpng, the
 * input on stdin and `stdinArgument` last (bpftool's "-").
 */
export async function execViaWithInput(
  spawner: SmallSpawner | undefined,
  argv: readonly string[],
  input: {
    readonly tool: string;
    readonly name: string;
    readonly text: string;
    readonly stdinArgument?: string;
  },
  options: { readonly timeoutMs: number },
): Promise<ExecResult> {
  const spawned =
    spawner === undefined
      ? undefined
      : await withInputFile(input.tool, input.name, input.text, (path) =>
          spawner.exec([...argv, path], options),
        );
  const onStdin = input.stdinArgument === undefined ? argv : [...argv, input.stdinArgument];
  return spawned ?? execCommand(onStdin, { ...options, stdin: input.text });
}

/**
 * A private directory (`kpng-<tool>-…`) for the files of one command, removed once `use` has
 * settled; undefined when it cannot be made (a full /tmp).
 */
async function inPrivateDir<T>(
  tool: string,
  use: (dir: string) => Promise<T | undefined>,
): Promise<T | undefined> {
  let dir: string;
  try {
    dir = await mkdtemp(join(tmpdir(), `kpng-${tool}-`));
  } catch {
    return undefined;
  }
  try {
    return await use(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * `input` in a file of a private directory (the file mode 0600) for a command the small process
 * starts: `use` gets its path. Undefined when the file cannot be written (a full /tmp): the caller
 * then starts the command itself, with the input on stdin.
 */
export function withInputFile<T>(
  tool: string,
  name: string,
  input: string,
  use: (path: string) => Promise<T>,
): Promise<T | undefined> {
  return inPrivateDir(tool, async (dir) => {
    const path = join(dir, name);
    try {
      await writeFile(path, input, { mode: 0o600 });
    } catch {
      return undefined;
    }
    return use(path);
  });
}

/**
 * The path of a file, not yet made, in a private directory, for the output of a command the
 * small process starts (SmallSpawner.exec's `stdoutFile`): output too large for one message goes
 * through a file, as input does. Undefined when the directory cannot be made.
 */
export function withOutputFile<T>(tool: string, use: (path: string) => Promise<T>): Promise<T | undefined> {
  return inPrivateDir(tool, (dir) => use(join(dir, "output")));
}

/** The process's one small spawner, forked at its first use: call it early, while kpng is small. */
export function sharedSmallSpawner(): SmallSpawner {
  shared ??= new SmallSpawner();
  return shared;
}

export class SmallSpawner {
  #child: ChildProcess | undefined;
  readonly #waiting = new Map<number, Waiting>();
  #seq = 0;
  #started = false;

  /** Forks the small process now: call it early, while this process is small. */
  constructor() {
    this.#start();
  }

  /** The small process's pid (for tests and diagnostics). */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Runs argv to completion within `timeoutMs` (see execCommand); rejects when it cannot start. */
  exec(
    argv: readonly string[],
    options: { readonly timeoutMs: number; readonly niceness?: number; readonly stdoutFile?: string },
  ): Promise<ExecResult> {
    const child = this.#child?.connected ? this.#child : this.#start();
    if (child === undefined) return Promise.reject(new Error("cannot start the small spawner process"));
    const id = ++this.#seq;
    return new Promise<ExecResult>((resolve, reject) => {
      const deadline = answerDeadline(options.timeoutMs + ANSWER_GRACE_MS, () => {
        this.#fail(child, `no answer within ${options.timeoutMs + ANSWER_GRACE_MS} ms`);
      });
      this.#waiting.set(id, { child, argv, groups: new Set(), resolve, reject, deadline });
      const request: SpawnRequest = { id, argv, ...options };
      child.send(request, (err) => {
        if (err) this.#fail(child, `cannot reach the small spawner process: ${err.message}`);
      });
    });
  }

  /** Stops the small process; the calls in flight fail. */
  close(): void {
    const child = this.#child;
    if (child !== undefined) this.#fail(child, "closed");
  }

  #start(): ChildProcess | undefined {
    if (this.#started) restarts.inc();
    this.#started = true;
    let child: ChildProcess;
    try {
      // Not the proxy's own flags (heap size, profiling, GC tracing): this process is small.
      child = fork(MAIN, [], { execArgv: [], stdio: ["ignore", "ignore", "inherit", "ipc"] });
    } catch {
      this.#child = undefined;
      return undefined;
    }
    this.#child = child;
    child.on("message", (m: SpawnResponse) => {
      const waiting = this.#waiting.get(m.id);
      if (waiting === undefined) return;
      if ("started" in m) {
        waiting.groups.add(m.started);
        return;
      }
      if ("spawnFailure" in m) {
        countExec(waiting.argv, { spawnFailure: m.spawnFailure });
        return;
      }
      this.#waiting.delete(m.id);
      waiting.deadline.clear();
      if ("error" in m) {
        waiting.reject(new Error(m.error));
        return;
      }
      if (m.result.timedOut) countExec(waiting.argv, { timedOut: true });
      waiting.resolve(m.result);
    });
    child.on("error", () => this.#fail(child, "the small spawner process failed"));
    child.on("exit", (code, signal) =>
      this.#fail(child, `the small spawner process exited (${signal ?? code})`),
    );
    // It must not keep the proxy alive; a call in flight does, by its timer.
    child.unref();
    child.channel?.unref();
    return child;
  }

  /**
   * The child is given up on: the commands it still runs are killed, then the child if it runs,
   * and every call waiting on it fails. (Commands first: a command that ended while the child
   * hangs is its unreaped zombie, so its group id cannot have been reused yet.)
   */
  #fail(child: ChildProcess, why: string): void {
    if (this.#child === child) this.#child = undefined;
    child.removeAllListeners();
    child.on("error", () => {});
    const failed = [...this.#waiting].filter(([, w]) => w.child === child);
    for (const [, w] of failed) for (const group of w.groups) killProcessGroup(group);
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    for (const [id, w] of failed) {
      this.#waiting.delete(id);
      w.deadline.clear();
      w.reject(new Error(why));
    }
  }
}
