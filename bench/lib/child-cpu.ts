// CPU time spent by this process's children (nft, bpftool), which process.cpuUsage() leaves out:
// the children already reaped (cutime + cstime of /proc/self/stat) and those still running
// (each live descendant's own time and that of its reaped children), in seconds.

import { readdirSync, readFileSync } from "node:fs";

/** Kernel clock ticks per second (USER_HZ), 100 on every Linux kpng runs on. */
const TICKS = 100;

/** utime, stime, cutime, cstime of a process, in ticks; undefined once it is gone. */
function times(pid: number | "self"): [number, number, number, number] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces): state is field 3, utime field 14.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return [Number(f[11]), Number(f[12]), Number(f[13]), Number(f[14])];
  } catch {
    return undefined;
  }
}

function liveChildren(pid: number | "self"): number[] {
  const out: number[] = [];
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim();
      if (text !== "") out.push(...text.split(" ").map(Number));
    }
  } catch {
    // Gone meanwhile: its time is in its parent's cutime/cstime once reaped.
  }
  return out;
}

function liveTicks(pid: number): number {
  const t = times(pid);
  if (t === undefined) return 0;
  let sum = t[0] + t[1] + t[2] + t[3];
  for (const child of liveChildren(pid)) sum += liveTicks(child);
  return sum;
}

/** CPU seconds (user + system) used so far by every child, reaped or running. */
export function childrenCpuSeconds(): number {
  const self = times("self");
  let ticks = self === undefined ? 0 : self[2] + self[3];
  for (const child of liveChildren("self")) ticks += liveTicks(child);
  return ticks / TICKS;
}
