// `--dry-run` against the cold start it stands for: N Services × 10 endpoints from a cluster file
// (bench/lib/cluster.ts), each run in a fresh network namespace.
//   dry run     `kpng file --input <file> --no-watch to-local to-nft … --dry-run > <file>`, as an
//               operator keeps the rules: wall time to its exit, CPU of it and of every process it
//               started (nft, ip, nsenter, the small process), its peak RSS and the largest nft
//               process's, and the bytes of rules it printed;
//   cold start  the same kpng without --dry-run: wall time until its first ruleset is applied
//               (the debug line `nftables synced`), as bench/scale.ts measures it.
// The dry run should take no longer than the cold start. Needs root (network namespaces).
//
// Each size runs --rounds times (default 2), alternating which of the two goes first.
//
//   node bench/nft-dry-run.ts [--sizes=10000,100000] [--rounds=2] [--quick]

import { spawn, spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BENCH_KPNG_ENV, kpngOnFile, kpngOnFileArgv, writeClusterFile } from "./lib/cluster.ts";
import { openBenchNetns } from "./lib/nft-netns.ts";
import { flagValue, sizesFlag, table } from "./lib/table.ts";

const quick = process.argv.includes("--quick");
const SIZES = sizesFlag(quick ? [1000] : [10_000, 100_000]);
const NODE_IP = "192.0.2.1";
const COLD_TIMEOUT_MS = 600_000;
const ROUNDS = Number(flagValue("rounds") ?? (quick ? 1 : 2));

/** A process's own user + system CPU, ms; undefined once it is gone. */
function cpuMsOf(pid: number): number | undefined {
  const stat = read(`/proc/${pid}/stat`);
  if (stat === "") return undefined;
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}

function read(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/** Every live descendant of `pid`. */
function descendants(pid: number): number[] {
  const out: number[] = [];
  const tasks = (() => {
    try {
      return readdirSync(`/proc/${pid}/task`);
    } catch {
      return [];
    }
  })();
  for (const task of tasks) {
    for (const child of read(`/proc/${pid}/task/${task}/children`).trim().split(" ")) {
      if (child === "") continue;
      out.push(Number(child), ...descendants(Number(child)));
    }
  }
  return out;
}

const hwmMiB = (pid: number): number =>
  Number(/VmHWM:\s+(\d+)/.exec(read(`/proc/${pid}/status`))?.[1] ?? 0) / 1024;

interface DryRun {
  readonly wallS: number;
  readonly cpuS: number;
  readonly kpngPeakMiB: number;
  readonly nftPeakMiB: number;
  readonly rulesMiB: number;
}

/**
 * The dry run in `netns`. Its CPU is the sum of every process's own CPU as last read while it ran
 * (every 20 ms): kpng's and that of each process below it, whoever reaps them.
 */
function dryRun(netns: string, file: string, rules: string): Promise<DryRun> {
  return new Promise((resolve, reject) => {
    const out = openSync(rules, "w");
    const t0 = performance.now();
    const argv = [...kpngOnFileArgv(NODE_IP, file, ["to-nft"], ["--no-watch"]), "--dry-run"];
    const child = spawn("ip", ["netns", "exec", netns, ...argv], {
      stdio: ["ignore", out, "inherit"],
      env: { ...process.env, ...BENCH_KPNG_ENV, KPNG_LOG_LEVEL: "warn" },
    });
    closeSync(out);
    let kpngPeak = 0;
    let nftPeak = 0;
    /** Each process's own CPU as last read, by pid. */
    const cpu = new Map<number, number>();
    const poll = setInterval(() => {
      const pid = child.pid ?? 0;
      kpngPeak = Math.max(kpngPeak, hwmMiB(pid));
      for (const p of [pid, ...descendants(pid)]) {
        const ms = cpuMsOf(p);
        if (ms !== undefined) cpu.set(p, ms);
        if (p !== pid && read(`/proc/${p}/comm`).trim() === "nft") nftPeak = Math.max(nftPeak, hwmMiB(p));
      }
    }, 20);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearInterval(poll);
      if (code !== 0) {
        reject(new Error(`the dry run exited with ${code}`));
        return;
      }
      resolve({
        wallS: (performance.now() - t0) / 1000,
        cpuS: [...cpu.values()].reduce((a, b) => a + b, 0) / 1000,
        kpngPeakMiB: kpngPeak,
        nftPeakMiB: nftPeak,
        rulesMiB: statSync(rules).size / 2 ** 20,
      });
    });
  });
}

/** The cold start in `netns`: seconds until the first ruleset is applied. */
async function coldStart(netns: string, file: string): Promise<number> {
  const kpng = kpngOnFile(netns, NODE_IP, file, ["to-nft"]);
  try {
    const synced = await kpng.waitFor((t) => t.includes('"msg":"nftables synced"'), 0, COLD_TIMEOUT_MS);
    return (synced.at - kpng.startedAt) / 1000;
  } finally {
    await kpng.stop();
  }
}

/** One measurement in a fresh namespace, deleted afterwards; undefined without root. */
async function inFreshNetns<T>(name: string, measure: (netns: string) => Promise<T>): Promise<T | undefined> {
  const ns = openBenchNetns(name);
  if (ns === undefined) return undefined;
  try {
    return await measure(ns.name);
  } finally {
    ns.close();
  }
}

async function main(): Promise<void> {
  const rows: string[][] = [];
  const work = mkdtempSync(join(tmpdir(), "kpng-dry-run-bench-"));
  try {
    for (const services of SIZES) {
      const file = writeClusterFile({ services, endpointsPerService: 10 }, work);
      // The file on disk before anything is timed: its write-back would weigh on the first run.
      spawnSync("sync");
      // Rounds alternate which of the two goes first.
      for (let round = 0; round < ROUNDS; round++) {
        const runDry = () => inFreshNetns("dry-run", (ns) => dryRun(ns, file, join(work, "rules.nft")));
        const runCold = () => inFreshNetns("dry-run-cold", (ns) => coldStart(ns, file));
        const dryFirst = round % 2 === 0;
        let dry: DryRun | undefined;
        let cold: number | undefined;
        if (dryFirst) {
          dry = await runDry();
          cold = await runCold();
        } else {
          cold = await runCold();
          dry = await runDry();
        }
        if (dry === undefined || cold === undefined) return;
        rows.push([
          String(services),
          dryFirst ? "dry run" : "cold start",
          dry.wallS.toFixed(2),
          cold.toFixed(2),
          dry.cpuS.toFixed(2),
          dry.kpngPeakMiB.toFixed(0),
          dry.nftPeakMiB.toFixed(0),
          dry.rulesMiB.toFixed(1),
        ]);
      }
      rmSync(file);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  console.log(
    "\n--dry-run against the cold start, N Services × 10 endpoints from a cluster file, each in a fresh\n" +
      "network namespace (target: the dry run takes no longer than the cold start)\n",
  );
  console.log(
    table(
      [
        "services",
        "first",
        "dry run s",
        "cold start: rules in s",
        "dry run CPU s (all processes)",
        "kpng peak RSS MiB",
        "largest nft peak RSS MiB",
        "rules MiB",
      ],
      rows,
    ),
  );
}

await main();
