// Running the kpng command line in end-to-end tests: a run that must succeed, and waiting for a
// brain's API socket.

import { spawn } from "node:child_process";
import { stat } from "node:fs/promises";

const cli = ["src/cli/main.ts"];

export interface KpngRun {
  /** The exit code; null when a signal ended it. */
  readonly code: number | null;
  readonly out: string;
  readonly err: string;
}

export interface KpngRunOptions {
  /** Killed (SIGKILL) after this long. */
  readonly timeoutMs?: number;
  /** Added to the environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** Run inside this network namespace (`ip netns exec`). */
  readonly netns?: string;
}

/** Runs `kpng <args>` to its exit, however it ends: its exit code and output. */
export function kpngRun(args: readonly string[], options: KpngRunOptions = {}): Promise<KpngRun> {
  const argv = [process.execPath, ...cli, ...args];
  const [file, ...rest] =
    options.netns === undefined ? argv : ["ip", "netns", "exec", options.netns, ...argv];
  return new Promise((resolve, reject) => {
    const child = spawn(file as string, rest, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...options.env },
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      err += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
}

/** Runs `kpng <args>`; resolves its stdout when it exits 0, rejects with its stderr otherwise. */
export async function kpngOutput(args: readonly string[], timeoutMs = 30_000): Promise<string> {
  const { code, out, err } = await kpngRun(args, { timeoutMs });
  if (code !== 0) throw new Error(`kpng ${args.join(" ")} exited ${code}: ${err}`);
  return out;
}

/** Resolves once `path` exists (a brain's unix socket); throws after 15 s. */
export async function waitForSocket(path: string): Promise<void> {
  for (let i = 0; i < 150; i++) {
    if (await stat(path).catch(() => undefined)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${path} never appeared`);
}
