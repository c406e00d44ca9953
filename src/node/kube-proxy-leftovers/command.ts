// Runs the tools the kube-proxy cleanup needs (iptables-save/-restore, nft, ipvsadm, ipset, ip)
// from an argv, data on stdin, with a deadline. An interface, so tests can record the calls.

import { spawn } from "node:child_process";

export interface CommandOutput {
  /** The exit code; -1 when the command could not start (not installed) or timed out. */
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CommandRunner {
  run(argv: readonly string[], stdin?: string): Promise<CommandOutput>;
}

export class ExecCommandRunner implements CommandRunner {
  readonly #timeoutMs: number;

  constructor(timeoutMs = 30_000) {
    this.#timeoutMs = timeoutMs;
  }

  run(argv: readonly string[], stdin = ""): Promise<CommandOutput> {
    const [file = "", ...args] = argv;
    return new Promise((resolve) => {
      const child = spawn(file, args, {
        stdio: ["pipe", "pipe", "pipe"],
        timeout: this.#timeoutMs,
        killSignal: "SIGKILL",
      });
      let stdout = "";
      let stderr = "";
      child.stdout.setEncoding("utf8").on("data", (c: string) => {
        stdout += c;
      });
      child.stderr.setEncoding("utf8").on("data", (c: string) => {
        stderr += c;
      });
      child.on("error", (err) => resolve({ code: -1, stdout, stderr: `${stderr}${err.message}` }));
      child.on("close", (code, signal) =>
        resolve({
          code: code ?? -1,
          stdout,
          stderr: signal === null ? stderr : `${stderr}killed by ${signal}`,
        }),
      );
      child.stdin.on("error", () => {});
      child.stdin.end(stdin);
    });
  }
}
