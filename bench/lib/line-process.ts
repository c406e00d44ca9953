// A process the end-to-end benchmarks run inside a network namespace (kpng itself, the test API
// server), read line by line as its output arrives, with each line's arrival time: that is how a
// benchmark sees "rules applied" without polling the kernel. Also reads the process's peak memory
// and CPU times from /proc (`ip netns exec` execs in place, so the pid is the program's own).

import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

/** Wall clock in ms with sub-ms precision, comparable between processes of this machine. */
export function wallMs(): number {
  return performance.timeOrigin + performance.now();
}

export interface Line {
  readonly text: string;
  /** wallMs() when the line was read. */
  readonly at: number;
}

export interface CpuTimes {
  /** The process's own user + system CPU, ms. */
  readonly selfMs: number;
  /** CPU of its children that have exited (nft -f runs), ms. */
  readonly childrenMs: number;
  /**
   * Its minor page faults: each a first touch of memory, which on a virtual machine can cost
   * more than the work that touches it (docs/performance.md).
   */
  readonly minorFaults: number;
}

/** How long a line may take to come before a wait fails. */
const DEFAULT_WAIT_MS = 300_000;

export class LineProcess {
  readonly name: string;
  readonly pid: number;
  readonly startedAt: number;
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #lines: Line[] = [];
  readonly #waiters = new Set<() => void>();
  #exited: string | undefined;

  constructor(
    name: string,
    netns: string,
    argv: readonly string[],
    env: Readonly<Record<string, string>> = {},
  ) {
    this.name = name;
    this.startedAt = wallMs();
    this.#child = spawn("ip", ["netns", "exec", netns, ...argv], {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, ...env },
    });
    this.pid = this.#child.pid ?? -1;
    this.#child.stdin.on("error", () => {});
    // Lines of both streams (kpng logs to stderr), each stamped when read.
    for (const stream of [this.#child.stdout, this.#child.stderr]) {
      createInterface({ input: stream }).on("line", (text) => {
        this.#lines.push({ text, at: wallMs() });
        // Only the recent past is ever waited for; keep memory bounded on a chatty process.
        if (this.#lines.length > 10_000) this.#lines.splice(0, 5_000);
        this.#notify();
      });
    }
    this.#child.on("close", (code, signal) => {
      this.#exited = `exited with ${code ?? signal}`;
      this.#notify();
    });
  }

  write(line: string): void {
    this.#child.stdin.write(`${line}\n`);
  }

  /** The first line read at or after `since` (wallMs) that `match` accepts. */
  waitFor(match: (text: string) => boolean, since = 0, timeoutMs = DEFAULT_WAIT_MS): Promise<Line> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const found = this.#lines.find((l) => l.at >= since && match(l.text));
        if (found !== undefined) done(() => resolve(found));
        else if (this.#exited !== undefined)
          done(() => reject(new Error(`${this.name} ${this.#exited}: ${this.#tail()}`)));
      };
      const timer = setTimeout(
        () =>
          done(() =>
            reject(new Error(`${this.name}: no awaited line after ${timeoutMs} ms: ${this.#tail()}`)),
          ),
        timeoutMs,
      );
      const done = (settle: () => void): void => {
        clearTimeout(timer);
        this.#waiters.delete(check);
        settle();
      };
      this.#waiters.add(check);
      check();
    });
  }

  /** The texts of the lines read at or after `since` (wallMs), of the recent lines kept. */
  lines(since = 0): string[] {
    return this.#lines.filter((l) => l.at >= since).map((l) => l.text);
  }

  /** The lines read at or after `since` (wallMs), with their arrival times, of the recent lines kept. */
  timedLines(since = 0): Line[] {
    return this.#lines.filter((l) => l.at >= since);
  }

  /** How many lines read at or after `since` (wallMs) `match` accepts (of the recent lines kept). */
  count(match: (text: string) => boolean, since = 0): number {
    return this.#lines.filter((l) => l.at >= since && match(l.text)).length;
  }

  /** Peak resident memory so far (VmHWM), in MiB. */
  peakRssMiB(): number {
    return this.#statusMiB("VmHWM");
  }

  /** The resident set now. */
  rssMiB(): number {
    return this.#statusMiB("VmRSS");
  }

  #statusMiB(field: string): number {
    const status = readFileSync(`/proc/${this.pid}/status`, "utf8");
    const kib = Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
    return kib / 1024;
  }

  cpuTimes(): CpuTimes {
    return cpuOf(readFileSync(`/proc/${this.pid}/stat`, "utf8"));
  }

  /**
   * CPU of the children still running (a long-lived `nft -i`, the small spawner) and of what
   * they reaped, ms: reaped children are in cpuTimes().childrenMs, live ones only in their own
   * /proc entries.
   */
  liveChildrenCpuMs(): number {
    let total = 0;
    for (const ms of this.liveChildrenCpu().values()) total += ms;
    return total;
  }

  /** liveChildrenCpuMs() by child, named by its first three arguments (`nft -c -i`). */
  liveChildrenCpu(): Map<string, number> {
    const out = new Map<string, number>();
    let children: string[] = [];
    try {
      children = readFileSync(`/proc/${this.pid}/task/${this.pid}/children`, "utf8").trim().split(" ");
    } catch {
      return out;
    }
    for (const pid of children) {
      if (pid === "") continue;
      try {
        // With what it reaped: the commands kpng's small spawner started for it (conntrack).
        const cpu = cpuOf(readFileSync(`/proc/${pid}/stat`, "utf8"));
        const ms = cpu.selfMs + cpu.childrenMs;
        const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").slice(0, 3);
        const name = argv.map((a, i) => (i === 0 ? (a.split("/").pop() ?? a) : a)).join(" ");
        out.set(name, (out.get(name) ?? 0) + ms);
      } catch {
        // It has exited since.
      }
    }
    return out;
  }

  /** SIGTERM, then SIGKILL after graceMs; resolves once it is gone. */
  async stop(graceMs = 10_000): Promise<void> {
    if (this.#exited !== undefined) return;
    const gone = new Promise<void>((resolve) => this.#child.once("close", () => resolve()));
    this.#child.stdin.end();
    this.#child.kill("SIGTERM");
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), graceMs);
    await gone;
    clearTimeout(timer);
  }

  #tail(): string {
    return `\n${this.#lines
      .slice(-15)
      .map((l) => l.text)
      .join("\n")}`;
  }

  #notify(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }
}

/** A process's CPU times from its /proc/<pid>/stat line. */
function cpuOf(stat: string): CpuTimes {
  // Fields after the parenthesised command name; utime is field 14 of the whole line.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const tick = 1000 / 100; // USER_HZ is 100 on Linux
  const n = (i: number) => Number(fields[i - 3] ?? Number.NaN) * tick;
  return { selfMs: n(14) + n(15), childrenMs: n(16) + n(17), minorFaults: Number(fields[10 - 3]) };
}
