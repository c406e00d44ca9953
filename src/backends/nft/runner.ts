// The only place that runs `nft`. Transactions go to `nft -f -` on stdin (argv array, no shell);
// each one is atomic in the kernel: it applies completely or not at all. Every call has a
// deadline: a hung `nft` is killed and the call fails, so the sync loop logs it and retries.

import type { ChildProcess } from "node:child_process";
import { readFile } from "node:fs/promises";
import { CommandFailed, type ExecResult, execCommand, firstLine, stopCommand } from "../../host/exec.ts";
import { type SmallSpawner, withInputFile, withOutputFile } from "../../host/small-spawner.ts";
import type { NftFamily } from "../../model/ip.ts";

export class NftError extends CommandFailed {}

/**
 * nft ran and refused what it was given: the input, or the kernel's answer to it. Not a deadline,
 * a signal or an nft that could not start.
 */
export class NftRejected extends NftError {}

/** Answers that say the machine is short of something or kpng may not act, not that the rules are wrong. */
const NOT_THE_RULES = new RegExp(
  [
    "Cannot allocate memory",
    "No buffer space available",
    "Resource temporarily unavailable",
    "Interrupted system call",
    "Too many open files",
    "Operation not permitted",
  ].join("|"),
);

/**
 * Whether deleting kpng's table and writing it anew may cure `e`: nft refused the rules (an
 * object of another type under kpng's name, say). A slow or starved nft would refuse the rewrite
 * too, after Services had lost their rules.
 */
export function curableByRewrite(e: unknown): boolean {
  return e instanceof NftRejected && !NOT_THE_RULES.test(e.stderr);
}

export interface NftRunner {
  /**
   * Applies one transaction atomically. `text` has one statement per line; `line`, when given,
   * is the same statements joined on one line, for a runner that feeds `nft -i`.
   */
  run(text: string, line?: string): Promise<void>;
  /**
   * Applies one transaction that commutes with every other transaction the caller has in flight
   * (element changes only), so the caller may run several at once: nft's parsing, most of its
   * time, then uses every core, and the kernel commits them one after another. Each is still
   * atomic. Without it, the caller runs every transaction alone.
   */
  runConcurrently?(text: string): Promise<void>;
  /** Checks a transaction against the current ruleset without applying it. */
  check(text: string): Promise<void>;
  /**
   * One JSON listing of a table's objects (`nft -j list …`) as nft printed it, or undefined when
   * the table or the set does not exist. Its bytes, not a string: a map can hold a million
   * elements (adopt.ts).
   */
  list(family: NftFamily, table: string, what: NftListing): Promise<Buffer | undefined>;
  /** Gets ready for the next transaction ahead of time (a long-lived process); never fails. */
  prepare?(): Promise<void>;
  /** Kills every `nft` process still running (at shutdown); their calls fail. */
  close?(): void;
}

/**
 * A listing: the declarations of a table's chains, sets or maps (those of the other tables of
 * the family may come with them), or one set or map with its elements.
 */
export type NftListing =
  | { readonly objects: "chains" | "sets" | "maps" }
  | { readonly kind: "set" | "map"; readonly name: string };

/** nft's arguments for a listing. Declarations are listed terse: nft then reads no elements. */
export function listingArgs(family: NftFamily, table: string, what: NftListing): string[] {
  if ("name" in what) return ["-j", "list", what.kind, family, table, what.name];
  if (what.objects === "chains") return ["-j", "list", "chains", family];
  // `list sets` takes a table (and fails when it is missing); nft 1.0.6 has no `list maps table`.
  if (what.objects === "sets") return ["-t", "-j", "list", "sets", "table", family, table];
  return ["-t", "-j", "list", "maps", family];
}

/**
 * How long one `nft -f` or listing may take. Large first syncs take seconds (44k services: 8 s in
 * 25k-statement transactions), so the deadline is generous; a hung `nft` is what it catches.
 */
const DEFAULT_NFT_TIMEOUT_MS = 60_000;

/**
 * How long one listing may take. The kernel walks a map from its start for every batch of a dump,
 * so listing a map costs its size squared: an endpoint map of a million elements (100k Services ×
 * 10 endpoints) takes about a minute, where a transaction's deadline would kill it and fail every
 * sync until the table is deleted and rewritten (docs/nft.md, "Restarts at scale"). Restarts list
 * the endpoint maps only when both generations are in the table.
 */
const DEFAULT_LIST_TIMEOUT_MS = 10 * 60_000;

/** Runs `start` (which runs argv) and turns a start failure, a timeout or a signal into an NftError. */
async function exec(
  argv: readonly string[],
  timeoutMs: number,
  start: () => Promise<ExecResult>,
): Promise<ExecResult> {
  let r: ExecResult;
  try {
    r = await start();
  } catch (e) {
    if (e instanceof NftError) throw e;
    const message = (e as Error).message;
    throw new NftError(`cannot run ${argv[0] ?? "nft"}: ${message}`, message);
  }
  if (r.timedOut)
    throw new NftError(`${argv.join(" ")} did not finish within ${timeoutMs} ms; killed`, r.stderr);
  if (r.signal !== null) throw new NftError(`${argv.join(" ")} was killed (${r.signal})`, r.stderr);
  return r;
}

interface ExecNftRunnerOptions {
  /** Deadline of each call but listings; the process is killed when it passes. */
  readonly timeoutMs?: number;
  /** Deadline of a listing (`list`). */
  readonly listTimeoutMs?: number;
  /**
   * Starts the transactions (`nft -f`) and the listings: started from kpng itself, each would
   * block kpng for as long as a fork of it takes, which grows with kpng's memory, and leave its
   * pages to fault again (small-spawner.ts). Checks (`--dry-run`, which then exits) are started
   * from kpng.
   */
  readonly spawner?: SmallSpawner;
}

/** The programs the nft backend starts (the image must contain them). */
export const NFT_BINARIES: readonly string[] = ["nft"];

/** Runs the real `nft`. `command` may prefix it, e.g. `["ip", "netns", "exec", "ns1", "nft"]`. */
export class ExecNftRunner implements NftRunner {
  readonly #command: readonly string[];
  readonly #timeoutMs: number;
  readonly #listTimeoutMs: number;
  readonly #running = new Set<ChildProcess>();
  readonly #spawner: SmallSpawner | undefined;
  /** Calls in flight through the spawner, failed at once by close(). */
  readonly #spawnedCalls = new Set<(e: Error) => void>();
  #closed = false;
  constructor(command: readonly string[] = ["nft"], options: ExecNftRunnerOptions = {}) {
    this.#command = command;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_NFT_TIMEOUT_MS;
    this.#listTimeoutMs = options.listTimeoutMs ?? DEFAULT_LIST_TIMEOUT_MS;
    this.#spawner = options.spawner;
  }

  close(): void {
    this.#closed = true;
    for (const child of this.#running) stopCommand(child);
    for (const fail of this.#spawnedCalls) fail(new NftError("the nft runner is closed", ""));
  }

  #exec(args: readonly string[], stdin: string, timeoutMs = this.#timeoutMs): Promise<ExecResult> {
    if (this.#closed) return Promise.reject(new NftError("the nft runner is closed", ""));
    const argv = [...this.#command, ...args];
    return exec(argv, timeoutMs, () => execCommand(argv, { stdin, timeoutMs, track: this.#running }));
  }

  /**
   * `nft -f <file>` started by the small process, with the same errors as #exec; the transaction
   * goes in a file of a private directory, removed afterwards. If the file cannot be written
   * (a full /tmp), kpng starts nft itself with the transaction on stdin.
   */
  async #spawned(spawner: SmallSpawner, text: string): Promise<ExecResult> {
    if (this.#closed) throw new NftError("the nft runner is closed", "");
    const spawned = await withInputFile("nft", "transaction.nft", text, (path) =>
      this.#fromSmallProcess(spawner, ["-f", path]),
    );
    return spawned ?? this.#exec(["-f", "-"], text);
  }

  /**
   * nft with `args` started by the small process, with the same errors as #exec. close() fails
   * the call at once; the process ends by its deadline, or with the small process when kpng exits.
   */
  #fromSmallProcess(
    spawner: SmallSpawner,
    args: readonly string[],
    stdoutFile?: string,
    timeoutMs = this.#timeoutMs,
  ): Promise<ExecResult> {
    if (this.#closed) return Promise.reject(new NftError("the nft runner is closed", ""));
    const argv = [...this.#command, ...args];
    const options = { timeoutMs, ...(stdoutFile === undefined ? {} : { stdoutFile }) };
    return exec(
      argv,
      timeoutMs,
      () =>
        new Promise<ExecResult>((resolve, reject) => {
          this.#spawnedCalls.add(reject);
          spawner
            .exec(argv, options)
            .then(resolve, reject)
            .finally(() => this.#spawnedCalls.delete(reject));
        }),
    );
  }

  async run(text: string): Promise<void> {
    const spawner = this.#spawner;
    const r =
      spawner === undefined ? await this.#exec(["-f", "-"], text) : await this.#spawned(spawner, text);
    if (r.code !== 0) throw new NftRejected(`nft -f failed: ${firstLine(r.stderr)}`, r.stderr);
  }

  /** Each call is its own `nft -f` process: nothing is shared between calls. */
  runConcurrently(text: string): Promise<void> {
    return this.run(text);
  }

  async check(text: string): Promise<void> {
    const r = await this.#exec(["--check", "-f", "-"], text);
    if (r.code !== 0) throw new NftRejected(`nft --check failed: ${firstLine(r.stderr)}`, r.stderr);
  }

  /**
   * Started by the small process when there is one, the listing (a million elements in a map at
   * 100k Services) coming back in a file; else by kpng, on a pipe.
   */
  async list(family: NftFamily, table: string, what: NftListing): Promise<Buffer | undefined> {
    const args = listingArgs(family, table, what);
    const spawner = this.#spawner;
    const listed =
      spawner === undefined
        ? undefined
        : await withOutputFile("nft", async (path) => {
            const r = await this.#fromSmallProcess(spawner, args, path, this.#listTimeoutMs);
            return { r, output: r.code === 0 ? await readFile(path) : Buffer.alloc(0) };
          });
    const { r, output } = listed ?? (await this.#listedByKpng(args));
    if (r.code !== 0) {
      if (/No such file or directory/.test(r.stderr)) return undefined;
      throw new NftRejected(`nft ${args.join(" ")} failed: ${firstLine(r.stderr)}`, r.stderr);
    }
    return output;
  }

  async #listedByKpng(args: readonly string[]): Promise<{ r: ExecResult; output: Buffer }> {
    const r = await this.#exec(args, "", this.#listTimeoutMs);
    return { r, output: Buffer.from(r.stdout) };
  }
}
