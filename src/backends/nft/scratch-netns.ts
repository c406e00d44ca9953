// Where `--dry-run` applies its transactions: an empty network namespace of its own, made for
// the run and deleted after it. Applying there, transaction by transaction as a cold start does,
// checks every statement in the kernel at the cold start's cost. One `nft --check` of the whole
// ruleset instead made nft parse every element as one transaction: at 100k Services, far longer
// than the cold start and gigabytes of nft (docs/performance.md).
//
// The namespace is named (`ip netns add`), so every nft of the run, concurrent ones included,
// enters the same one by its path, and a recycled process ID can never send them elsewhere. A
// run killed before it deleted its namespace leaves it behind; the next dry run deletes those
// whose process is gone, as does `kpng cleanup nft`.

import { existsSync, readdirSync } from "node:fs";
import { type ExecResult, execCommand, firstLine } from "../../host/exec.ts";

/** Runs argv to its end or its deadline (execCommand; a fake in tests). */
export type RunCommand = (argv: readonly string[], timeoutMs: number) => Promise<ExecResult>;

const runCommand: RunCommand = (argv, timeoutMs) => execCommand(argv, { timeoutMs });

const IP_TIMEOUT_MS = 10_000;
const PREFIX = "kpng-dry-run-";

/** The programs a dry run starts besides nft. */
export const SCRATCH_NETNS_BINARIES: readonly string[] = ["ip", "nsenter"];

interface ScratchNetnsOptions {
  readonly run?: RunCommand;
  /** Where `ip netns` keeps its named namespaces. */
  readonly netnsDir?: string;
  readonly pid?: number;
  /** Whether a process runs: a namespace left by one that does not is deleted. */
  readonly alive?: (pid: number) => boolean;
}

export class ScratchNetns {
  readonly name: string;
  readonly #path: string;
  readonly #run: RunCommand;

  private constructor(name: string, path: string, run: RunCommand) {
    this.name = name;
    this.#path = path;
    this.#run = run;
  }

  /** Makes the namespace; throws with `ip`'s own words when it cannot (no CAP_SYS_ADMIN, say). */
  static async create(options: ScratchNetnsOptions = {}): Promise<ScratchNetns> {
    const run = options.run ?? runCommand;
    const dir = options.netnsDir ?? "/run/netns";
    const name = `${PREFIX}${options.pid ?? process.pid}`;
    await ipNetns(run, ["add", name]);
    return new ScratchNetns(name, `${dir}/${name}`, run);
  }

  /** `argv` run inside the namespace. */
  command(argv: readonly string[]): string[] {
    return ["nsenter", `--net=${this.#path}`, "--", ...argv];
  }

  async remove(): Promise<void> {
    await ipNetns(this.#run, ["delete", this.name]);
  }
}

/**
 * Deletes the namespaces of dry runs whose process has ended (`kpng cleanup nft` does too) and
 * returns the names of those it could not delete; those of dry runs still running are kept.
 */
export async function removeLeftoverScratchNetns(options: ScratchNetnsOptions = {}): Promise<string[]> {
  const run = options.run ?? runCommand;
  const alive = options.alive ?? processExists(options.pid ?? process.pid);
  const failed: string[] = [];
  for (const left of leftBehind(options.netnsDir ?? "/run/netns", alive))
    await ipNetns(run, ["delete", left]).catch(() => failed.push(left));
  return failed;
}

async function ipNetns(run: RunCommand, args: readonly string[]): Promise<void> {
  const argv = ["ip", "netns", ...args];
  const r = await run(argv, IP_TIMEOUT_MS);
  if (r.timedOut) throw new Error(`${argv.join(" ")} did not finish within ${IP_TIMEOUT_MS} ms`);
  if (r.code !== 0) throw new Error(`${argv.join(" ")} failed: ${firstLine(r.stderr)}`);
}

/** Dry-run namespaces whose process has ended. */
function leftBehind(dir: string, alive: (pid: number) => boolean): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.filter((n) => {
    if (!n.startsWith(PREFIX)) return false;
    const pid = Number(n.slice(PREFIX.length));
    return Number.isInteger(pid) && pid > 0 && !alive(pid);
  });
}

/** Whether `pid` runs, judged from /proc; this process counts as running. */
function processExists(self: number): (pid: number) => boolean {
  return (pid) => pid === self || existsSync(`/proc/${pid}`);
}
