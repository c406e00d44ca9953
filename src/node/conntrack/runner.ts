// The only place that runs `conntrack`. Deletions go as one batch file (`conntrack -R`), one
// process per cleanup however many filters; every run has a deadline. conntrack opens the file
// by name and a spawned child's stdin is a socket, which /dev/stdin cannot open: the batch goes
// to a private temporary file instead (mode 0600 in a 0700 directory), removed afterwards.

import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import { type ExecResult, execCommand } from "../../host/exec.ts";
import {
  type SmallSpawner,
  sharedSmallSpawner,
  withInputFile,
  withOutputFile,
} from "../../host/small-spawner.ts";
import { lineSplitter } from "../../lib/line-splitter.ts";

export interface ConntrackRunner {
  /** Runs every line of a batch; resolves with how many entries were deleted. */
  deleteBatch(lines: readonly string[]): Promise<number>;
  /** Calls `onLine` with each line of `conntrack -L -p <protocol> -o extended`, without holding the table. */
  list(protocol: "udp" | "sctp", onLine: (line: string) => void): Promise<void>;
}

/**
 * Whether `conntrack` runs here, checked once at start: without it, every cleanup would fail.
 * Resolves with the reason when it does not.
 */
export async function conntrackMissing(
  command: readonly string[] = ["conntrack"],
): Promise<string | undefined> {
  try {
    const r = await execCommand([...command, "--version"], { timeoutMs: 10_000 });
    return r.code === 0 ? undefined : `${command.join(" ")} --version exited ${r.code}: ${r.stderr.trim()}`;
  } catch (e) {
    return (e as Error).message;
  }
}

/**
 * conntrack runs beside the syncs, never in their way (see cleaner.ts): each filter is a walk of
 * the whole conntrack hash table, and a batch that took a core from the next sync's `nft`
 * delayed that sync.
 */
const CONNTRACK_NICENESS = 10;

class ConntrackError extends Error {
  override readonly name = "ConntrackError";
}

/** The programs conntrack cleanup starts (the image must contain them). */
export const CONNTRACK_BINARIES: readonly string[] = ["conntrack"];

/** `onLine` for each line of the file, read a chunk at a time. */
async function eachLine(path: string, onLine: (line: string) => void): Promise<void> {
  for await (const line of createInterface({
    input: createReadStream(path),
    crlfDelay: Number.POSITIVE_INFINITY,
  }))
    onLine(line);
}

export class ExecConntrackRunner implements ConntrackRunner {
  readonly #command: readonly string[];
  readonly #timeoutMs: number;
  /**
   * Starts the deletion batches: one may follow any change, and started from kpng itself each
   * would block kpng for as long as a fork of it takes, which grows with kpng's memory.
   */
  readonly #spawner: SmallSpawner;

  /** `command` may prefix conntrack, e.g. `["ip", "netns", "exec", "ns1", "conntrack"]`. */
  constructor(options: { command?: readonly string[]; timeoutMs?: number } = {}) {
    this.#command = options.command ?? ["conntrack"];
    this.#timeoutMs = options.timeoutMs ?? 60_000;
    this.#spawner = sharedSmallSpawner();
  }

  async deleteBatch(lines: readonly string[]): Promise<number> {
    if (lines.length === 0) return 0;
    const deleted = await withInputFile("conntrack", "batch", `${lines.join("\n")}\n`, (file) =>
      this.#run(file),
    );
    if (deleted === undefined)
      throw new ConntrackError("cannot write the batch of entries to delete to a file");
    return deleted;
  }

  /**
   * Started by the small process, with the listing in a file read back a line at a time: the
   * listing runs after the first sync, when kpng holds the whole cluster's state and a fork of
   * it would cost the most (small-spawner.ts). Started by kpng, on a pipe, if the file's directory
   * cannot be made.
   */
  async list(protocol: "udp" | "sctp", onLine: (line: string) => void): Promise<void> {
    const argv = [...this.#command, "-L", "-p", protocol, "-o", "extended"];
    const options = { timeoutMs: this.#timeoutMs, niceness: CONNTRACK_NICENESS };
    let r: ExecResult;
    try {
      const listed = await withOutputFile("conntrack", async (path) => {
        const result = await this.#spawner.exec(argv, { ...options, stdoutFile: path });
        if (result.code === 0 && !result.timedOut) await eachLine(path, onLine);
        return result;
      });
      if (listed !== undefined) r = listed;
      else {
        const lines = lineSplitter(onLine);
        r = await execCommand(argv, { ...options, onStdout: (chunk) => lines.push(chunk) });
        lines.end();
      }
    } catch (e) {
      throw new ConntrackError((e as Error).message);
    }
    if (r.timedOut)
      throw new ConntrackError(`conntrack -L did not finish within ${this.#timeoutMs} ms; killed`);
    if (r.code !== 0)
      throw new ConntrackError(`conntrack -L exited ${r.code}: ${r.stderr.trim().split("\n")[0] ?? ""}`);
  }

  async #run(file: string): Promise<number> {
    let r: ExecResult;
    try {
      r = await this.#spawner.exec([...this.#command, "-R", file], {
        timeoutMs: this.#timeoutMs,
        niceness: CONNTRACK_NICENESS,
      });
    } catch (e) {
      throw new ConntrackError((e as Error).message);
    }
    // conntrack prints each deleted entry on a line of stdout.
    let deleted = 0;
    for (const line of r.stdout.split("\n")) if (line.trim() !== "") deleted++;
    if (r.timedOut)
      throw new ConntrackError(`conntrack -R did not finish within ${this.#timeoutMs} ms; killed`);
    if (r.signal !== null) throw new ConntrackError(`conntrack -R killed by ${r.signal}`);
    const stderr = r.stderr.slice(0, 4096).trim().split("\n")[0] ?? "";
    if (r.code !== 0) throw new ConntrackError(`conntrack -R exited ${r.code}: ${stderr}`);
    return deleted;
  }
}
