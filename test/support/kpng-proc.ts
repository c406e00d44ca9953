// What /proc says of a kpng started by bin/kpng: the script execs node in place, so the pid is
// kpng's. Read once kpng has written its first line; kpng is then stopped.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(fileURLToPath(new URL(".", import.meta.url)), "../..");
const BIN_KPNG = join(ROOT, "bin/kpng");
const EXAMPLE = join(ROOT, "examples/cluster.yaml");

export interface KpngProc {
  /** The environment, one VAR=value a line. */
  readonly environ: string;
  /** The command line, one argument an element. */
  readonly cmdline: readonly string[];
}

export function procOfKpng(env: NodeJS.ProcessEnv): Promise<KpngProc> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      BIN_KPNG,
      ["file", "--input", EXAMPLE, "to-local", "to-json", "--node-name", "node-1"],
      { env, stdio: ["ignore", "pipe", "ignore"] },
    );
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    let proc: KpngProc | undefined;
    child.stdout.once("data", () => {
      try {
        const read = (file: string) => readFileSync(`/proc/${child.pid}/${file}`, "utf8").split("\0");
        proc = { environ: read("environ").join("\n"), cmdline: read("cmdline").filter((a) => a !== "") };
      } finally {
        child.kill("SIGKILL");
      }
    });
    child.on("error", reject);
    child.on("exit", () => {
      clearTimeout(timer);
      if (proc === undefined) reject(new Error("kpng wrote nothing before it exited"));
      else resolve(proc);
    });
  });
}
