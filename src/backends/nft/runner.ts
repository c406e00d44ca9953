// The only place that runs `nft`. Transactions go to `nft -f -` on stdin (argv array, no shell);
// each one is atomic in the kernel: it applies completely or not at all.

import { spawn } from "node:child_process";
import type { NftFamily } from "./fragment.ts";

export class NftError extends Error {
  readonly stderr: string;
  constructor(message: string, stderr: string) {
    super(message);
    this.name = "NftError";
    this.stderr = stderr;
  }
}

export interface NftRunner {
  /**
   * Applies one transaction atomically. `text` has one statement per line; `line`, when given,
   * is the same statements joined on one line, for a runner that feeds `nft -i`.
   */
  run(text: string, line?: string): Promise<void>;
  /** Checks a transaction against the current ruleset without applying it. */
  check(text: string): Promise<void>;
  /** The JSON listing of one table (`nft -j list table`), or undefined when it does not exist. */
  listTable(family: NftFamily, table: string): Promise<unknown>;
  /** Gets ready for the next transaction ahead of time (a long-lived process); never fails. */
  prepare?(): Promise<void>;
}

interface Result {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function exec(argv: readonly string[], stdin: string): Promise<Result> {
  return new Promise((resolve, reject) => {
    const [cmd = "nft", ...args] = argv;
    const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.on("error", reject);
    child.on("close", (code) =>
      resolve({
        code: code ?? 1,
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString(),
      }),
    );
    child.stdin.on("error", () => {}); // a failing nft may close stdin early; `close` reports it
    child.stdin.end(stdin);
  });
}

/** Runs the real `nft`. `command` may prefix it, e.g. `["ip", "netns", "exec", "ns1", "nft"]`. */
export class ExecNftRunner implements NftRunner {
  readonly #command: readonly string[];
  constructor(command: readonly string[] = ["nft"]) {
    this.#command = command;
  }

  async run(text: string): Promise<void> {
    const r = await exec([...this.#command, "-f", "-"], text);
    if (r.code !== 0) throw new NftError(`nft -f failed: ${firstLine(r.stderr)}`, r.stderr);
  }

  async check(text: string): Promise<void> {
    const r = await exec([...this.#command, "--check", "-f", "-"], text);
    if (r.code !== 0) throw new NftError(`nft --check failed: ${firstLine(r.stderr)}`, r.stderr);
  }

  async listTable(family: NftFamily, table: string): Promise<unknown> {
    const r = await exec([...this.#command, "-j", "list", "table", family, table], "");
    if (r.code !== 0) {
      if (/No such file or directory/.test(r.stderr)) return undefined;
      throw new NftError(`nft list table failed: ${firstLine(r.stderr)}`, r.stderr);
    }
    return JSON.parse(r.stdout) as unknown;
  }
}

function firstLine(s: string): string {
  return s.split("\n").find((l) => l.trim() !== "") ?? "unknown error";
}
