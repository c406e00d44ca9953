// Runs a short-lived command from an argv array (never through a shell) and collects its output.
// Data for the command goes on stdin, so nothing from a caller is ever parsed as a command line.

import { spawn } from "node:child_process";

export interface CommandResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly code: number;
}

export interface RunOptions {
  /** Written to the command's stdin, which is then closed. */
  readonly stdin?: string;
  /** Kills the command after this long; default 30 s. */
  readonly timeoutMs?: number;
  /** Resolve with a non-zero exit code instead of throwing. */
  readonly allowFailure?: boolean;
}

/** A command that exited non-zero, could not start, or timed out. */
export class CommandError extends Error {
  readonly argv: readonly string[];
  readonly code: number;
  readonly stderr: string;

  constructor(argv: readonly string[], code: number, stderr: string, reason: string) {
    super(`${argv.join(" ")}: ${reason}${stderr.trim() === "" ? "" : `: ${stderr.trim()}`}`);
    this.name = "CommandError";
    this.argv = argv;
    this.code = code;
    this.stderr = stderr;
  }
}

/** Runs argv[0] with the remaining arguments and resolves once it exits. */
export function runCommand(argv: readonly string[], opts: RunOptions = {}): Promise<CommandResult> {
  const [file, ...args] = argv;
  if (file === undefined) return Promise.reject(new Error("runCommand: empty argv"));
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      stdio: ["pipe", "pipe", "pipe"],
      timeout: opts.timeoutMs ?? 30_000,
      killSignal: "SIGKILL",
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    child.on("error", (err) => reject(new CommandError(argv, -1, stderr, err.message)));
    child.on("close", (code, signal) => {
      const exitCode = code ?? -1;
      if (exitCode === 0 || (opts.allowFailure === true && signal === null)) {
        resolve({ stdout, stderr, code: exitCode });
      } else {
        const reason = signal === null ? `exit code ${exitCode}` : `killed by ${signal} (timeout?)`;
        reject(new CommandError(argv, exitCode, stderr, reason));
      }
    });
    // A command that exits without reading its stdin must not crash us with EPIPE.
    child.stdin.on("error", () => {});
    child.stdin.end(opts.stdin ?? "");
  });
}
