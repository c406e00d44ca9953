// Running the kpng command line in end-to-end tests: a run that must succeed, and waiting for a
// brain's API socket.

import { spawn } from "node:child_process";
import { stat } from "node:fs/promises";

const cli = ["src/cli/main.ts"];

/** Runs `kpng <args>`; resolves its stdout when it exits 0, rejects with its stderr otherwise. */
export function kpngOutput(args: readonly string[], timeoutMs = 30_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...cli, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      err += d;
    });
    const timer = setTimeout(() => child.kill(), timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`kpng ${args.join(" ")} exited ${code}: ${err}`));
    });
  });
}

/** Resolves once `path` exists (a brain's unix socket); throws after 15 s. */
export async function waitForSocket(path: string): Promise<void> {
  for (let i = 0; i < 150; i++) {
    if (await stat(path).catch(() => undefined)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${path} never appeared`);
}
