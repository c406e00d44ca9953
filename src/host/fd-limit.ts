// kpng's open-file limit. Every connection, pipe and command costs descriptors: the soft limit
// (often 1024) is raised to the hard one at start, as Go programs do since Go 1.19. Node itself
// does this before any code runs (node.cc, PlatformInit); when it could not (an embedder, a
// policy), `prlimit` from util-linux sets it on kpng's own pid (argv, no shell). Either way the
// value is logged once.

import { readFile } from "node:fs/promises";
import type { Logger } from "../observability/log.ts";
import { execCommand } from "./exec.ts";

/** The programs raising the limit may start (the image must contain them). */
export const FD_LIMIT_BINARIES: readonly string[] = ["prlimit"];

interface FdLimit {
  readonly soft: number;
  readonly hard: number;
}

/** The "Max open files" line of /proc/<pid>/limits; Infinity for "unlimited". */
export function parseFdLimit(limits: string): FdLimit | undefined {
  const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(limits);
  if (m === null) return undefined;
  const n = (t: string | undefined) => (t === "unlimited" ? Number.POSITIVE_INFINITY : Number(t));
  return { soft: n(m[1]), hard: n(m[2]) };
}

async function readFdLimit(): Promise<FdLimit | undefined> {
  return parseFdLimit(await readFile("/proc/self/limits", "utf8").catch(() => ""));
}

/** Raises the soft limit to the hard one if it is lower, and logs the result. */
export async function raiseFdLimit(log: Logger): Promise<FdLimit | undefined> {
  let limit = await readFdLimit();
  if (limit !== undefined && limit.soft < limit.hard) {
    const hard = Number.isFinite(limit.hard) ? String(limit.hard) : "unlimited";
    const r = await execCommand(["prlimit", `--pid=${process.pid}`, `--nofile=${hard}:${hard}`], {
      timeoutMs: 5000,
    }).catch((e: Error) => ({ code: 1, stderr: e.message }));
    if (r.code !== 0)
      log.warn(
        { soft: limit.soft, hard: limit.hard, err: r.stderr.trim() },
        "cannot raise the open-file limit",
      );
    limit = await readFdLimit();
  }
  if (limit === undefined) log.warn("cannot read the open-file limit");
  else log.info({ soft: limit.soft, hard: limit.hard }, "open-file limit");
  return limit;
}
