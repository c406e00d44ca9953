// A benchmark's child process measured from outside: its CPU (user + system, from this process's
// reaped-children times) and its peak RSS (VmHWM, read from /proc while it runs).

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { withHugePageMalloc } from "../../src/host/huge-page-malloc.ts";

/** This process's reaped children's CPU, ms. */
function childrenCpuMs(): number {
  // utime, stime, cutime, cstime are fields 14–17 of /proc/self/stat, in clock ticks (100 Hz).
  const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

/**
 * Runs `node <args>` (by default as bin/kpng runs kpng, malloc on huge pages): its CPU, wall
 * time, highest VmHWM and the first 4 KiB of its stdout.
 */
export function measured(
  args: readonly string[],
  {
    env = withHugePageMalloc(process.env),
    stderr = "inherit",
  }: { env?: NodeJS.ProcessEnv; stderr?: "inherit" | "ignore" } = {},
): Promise<{ cpuMs: number; wallMs: number; peakRssMiB: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const before = childrenCpuMs();
    const t0 = performance.now();
    const child = spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", stderr] });
    let stdout = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      // Only the phases' JSON line is kept; the CLI's document is counted, not held.
      if (stdout.length < 4096) stdout += chunk;
    });
    let peak = 0;
    const poll = setInterval(() => {
      try {
        const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
        const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
        peak = Math.max(peak, kb / 1024);
      } catch {
        // It has exited.
      }
    }, 20);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearInterval(poll);
      if (code !== 0) reject(new Error(`${args.join(" ")} exited with ${code}`));
      else
        resolve({
          cpuMs: childrenCpuMs() - before,
          wallMs: performance.now() - t0,
          peakRssMiB: peak,
          stdout,
        });
    });
  });
}
