// A long-running child process (an echo server, a kpng daemon) whose output is kept for failure
// messages and which can be waited on for a line and stopped.

import { spawn } from "node:child_process";
import { trackProcess } from "./safety-net.ts";

export interface ExitInfo {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface SpawnOptions {
  /** A label used in error messages. */
  readonly name?: string;
  /** Written to stdin, which is then closed. stdin is empty otherwise. */
  readonly stdin?: string;
  /** Extra environment variables. */
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

/** Output kept per stream; older output is dropped so a chatty daemon cannot grow memory. */
const MAX_KEPT_CHARS = 256 * 1024;

export class Spawned {
  readonly name: string;
  readonly pid: number;
  /** Resolves when the process has exited (never rejects). */
  readonly exited: Promise<ExitInfo>;
  #stdout = "";
  #stderr = "";
  #exit: ExitInfo | undefined;
  #listeners = new Set<() => void>();
  readonly #kill: (signal: NodeJS.Signals) => void;

  constructor(argv: readonly string[], opts: SpawnOptions = {}) {
    const [file, ...args] = argv;
    if (file === undefined) throw new Error("spawn: empty argv");
    this.name = opts.name ?? file;
    const child = spawn(file, args, {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, ...opts.env },
      cwd: opts.cwd,
    });
    trackProcess(child);
    this.#kill = (signal) => {
      if (this.#exit === undefined) child.kill(signal);
    };
    this.pid = child.pid ?? -1;
    child.stdin.on("error", () => {});
    child.stdin.end(opts.stdin ?? "");
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      this.#stdout = (this.#stdout + chunk).slice(-MAX_KEPT_CHARS);
      this.#notify();
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      this.#stderr = (this.#stderr + chunk).slice(-MAX_KEPT_CHARS);
      this.#notify();
    });
    this.exited = new Promise((resolve) => {
      child.on("error", (err) => {
        this.#stderr += `\nspawn failed: ${err.message}`;
        this.#exit ??= { code: -1, signal: null };
        this.#notify();
        resolve(this.#exit);
      });
      child.on("close", (code, signal) => {
        this.#exit ??= { code, signal };
        this.#notify();
        resolve(this.#exit);
      });
    });
  }

  stdout(): string {
    return this.#stdout;
  }

  stderr(): string {
    return this.#stderr;
  }

  running(): boolean {
    return this.#exit === undefined;
  }

  /** A description with the tail of both streams, for assertion and error messages. */
  describe(): string {
    const state =
      this.#exit === undefined ? "running" : `exited (code ${this.#exit.code}, signal ${this.#exit.signal})`;
    return `${this.name} [pid ${this.pid}, ${state}]\n--- stdout ---\n${tail(this.#stdout)}\n--- stderr ---\n${tail(this.#stderr)}`;
  }

  /**
   * Resolves with the first stdout or stderr line matching pattern. Rejects when the process
   * exits first or after timeoutMs, with the process output in the message.
   */
  waitForLine(pattern: RegExp, timeoutMs = 10_000): Promise<string> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const line = `${this.#stdout}\n${this.#stderr}`.split("\n").find((l) => pattern.test(l));
        if (line !== undefined) {
          finish(() => resolve(line));
        } else if (this.#exit !== undefined) {
          finish(() => reject(new Error(`exited before printing ${pattern}: ${this.describe()}`)));
        }
      };
      const timer = setTimeout(() => {
        finish(() =>
          reject(new Error(`no line matching ${pattern} after ${timeoutMs} ms: ${this.describe()}`)),
        );
      }, timeoutMs);
      const finish = (settle: () => void): void => {
        clearTimeout(timer);
        this.#listeners.delete(check);
        settle();
      };
      this.#listeners.add(check);
      check();
    });
  }

  /** Sends SIGTERM, then SIGKILL after graceMs; resolves once the process is gone. */
  async stop(graceMs = 3_000): Promise<ExitInfo> {
    if (this.#exit !== undefined) return this.#exit;
    this.#kill("SIGTERM");
    const timer = setTimeout(() => this.#kill("SIGKILL"), graceMs);
    const info = await this.exited;
    clearTimeout(timer);
    return info;
  }

  #notify(): void {
    for (const listener of [...this.#listeners]) listener();
  }
}

function tail(text: string, maxLines = 40): string {
  const lines = text.trimEnd().split("\n");
  return lines.length > maxLines ? ["…", ...lines.slice(-maxLines)].join("\n") : lines.join("\n");
}
