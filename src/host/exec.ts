// The one way kpng runs a command: an argv array (never a shell), data on stdin, output
// collected, and a deadline after which the process is killed. Runners for nft, iptables, ip and
// the cleanup tools build on it and decide what a failure means for them.

import { type ChildProcess, spawn } from "node:child_process";

export interface ExecResult {
  /** The exit code; 1 when the process ended by a signal. */
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  /** The signal that ended the process, if one did. */
  readonly signal: NodeJS.Signals | null;
  /** The deadline passed and the process was killed. */
  readonly timedOut: boolean;
}

interface ExecOptions {
  readonly stdin?: string;
  readonly timeoutMs: number;
  /** Told of the child once it runs and once it is gone (e.g. to kill it at shutdown). */
  readonly track?: { add(child: ChildProcess): void; delete(child: ChildProcess): void };
}

/** Runs argv to completion. Rejects only when the command cannot start (e.g. not installed). */
export function execCommand(argv: readonly string[], options: ExecOptions): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const [cmd = "", ...args] = argv;
    const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"] });
    options.track?.add(child);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, options.timeoutMs);
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.on("error", (e) => {
      clearTimeout(timer);
      options.track?.delete(child);
      reject(e);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      options.track?.delete(child);
      resolve({
        code: code ?? 1,
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString(),
        signal,
        timedOut,
      });
    });
    child.stdin.on("error", () => {}); // a failing process may close stdin early; `close` reports it
    child.stdin.end(options.stdin ?? "");
  });
}
