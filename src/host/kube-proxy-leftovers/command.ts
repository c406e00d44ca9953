// Runs the tools the kube-proxy cleanup needs (iptables-save/-restore, nft, ipvsadm, ipset, ip)
// from an argv, data on stdin, with a deadline. An interface, so tests can record the calls.

import { execCommand } from "../exec.ts";

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

  async run(argv: readonly string[], stdin = ""): Promise<CommandOutput> {
    try {
      const r = await execCommand(argv, { stdin, timeoutMs: this.#timeoutMs });
      if (r.signal !== null)
        return { code: -1, stdout: r.stdout, stderr: `${r.stderr}killed by ${r.signal}` };
      return { code: r.code, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      return { code: -1, stdout: "", stderr: (err as Error).message };
    }
  }
}
