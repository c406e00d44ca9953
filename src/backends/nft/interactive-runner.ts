// A runner that keeps one `nft -i` process alive and feeds it small transactions, one per line:
// starting `nft` and filling its cache costs far more than the change itself. Anything that does
// not fit the line protocol (large or multi-line transactions, checks, listings) goes to the
// fallback runner (`nft -f -`). If the process dies, hangs or prints what the protocol does not
// expect, it is killed, the transaction goes to the fallback, and the next one starts a new
// process. Each line commits atomically, so a transaction is never half applied: at worst it
// was applied and the fallback's re-run fails, which the backend answers with a full resync.

import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { CommandFailed, spawnCommand, stopCommand } from "../../host/exec.ts";
import { answerDeadline } from "../../lib/answer-deadline.ts";
import type { NftFamily } from "../../model/ip.ts";
import { isNftError, markerCommand, scanForMarker } from "./interactive-protocol.ts";
import { MAX_LINE_BYTES } from "./ops.ts";
import { type NftListing, NftRejected, type NftRunner } from "./runner.ts";

interface InteractiveNftRunnerOptions {
  /** The `nft` command, possibly prefixed, e.g. `["ip", "netns", "exec", "ns1", "nft"]`. */
  readonly command?: readonly string[];
  /** Runs what the interactive process does not: big transactions, checks, listings. */
  readonly fallback: NftRunner;
  /** Transactions whose line is longer go to the fallback (default: MAX_LINE_BYTES). */
  readonly maxLineBytes?: number;
  /** How long one transaction may take before the process is considered hung. */
  readonly timeoutMs?: number;
  /** Told when the process is given up on, with the reason (for logging). */
  readonly onRestart?: (reason: string) => void;
}

/** Why the interactive process could not tell whether a transaction was applied. */
class ProtocolFailure extends Error {}

interface Pending {
  readonly marker: string;
  readonly resolve: (output: string) => void;
  readonly reject: (e: Error) => void;
}

export class InteractiveNftRunner implements NftRunner {
  readonly #command: readonly string[];
  readonly #fallback: NftRunner;
  readonly #maxLineBytes: number;
  readonly #timeoutMs: number;
  readonly #onRestart: (reason: string) => void;
  #child: ChildProcessWithoutNullStreams | undefined;
  #stderr = "";
  #pending: Pending | undefined;
  #seq = 0;
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(options: InteractiveNftRunnerOptions) {
    this.#command = options.command ?? ["nft"];
    this.#fallback = options.fallback;
    this.#maxLineBytes = options.maxLineBytes ?? MAX_LINE_BYTES;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#onRestart = options.onRestart ?? (() => {});
  }

  /** The pid of the live `nft -i` process, if one runs (for tests and diagnostics). */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Without `line` (the renderer's one-line form), the transaction goes to the fallback. */
  run(text: string, line?: string): Promise<void> {
    if (line === undefined || Buffer.byteLength(line) > this.#maxLineBytes || this.#closed) {
      return this.#serialized(() => this.#fallback.run(text));
    }
    if (line === "") return Promise.resolve();
    return this.#serialized(async () => {
      let output: string;
      try {
        output = await this.#send(line);
      } catch (e) {
        if (!(e instanceof ProtocolFailure)) throw e;
        this.#giveUp(e.message);
        return this.#fallback.run(text);
      }
      if (output === "") return;
      if (isNftError(output)) throw new NftRejected(`nft failed: ${firstError(output)}`, output);
      this.#giveUp(`unexpected output: ${output.slice(0, 200)}`);
      return this.#fallback.run(text);
    });
  }

  /**
   * A transaction that commutes with the caller's others in flight goes to the fallback once
   * everything queued before it has settled, without holding up the queue: the caller starts
   * nothing that depends on it before it settles.
   */
  runConcurrently(text: string): Promise<void> {
    const fallback = this.#fallback;
    const run = () => (fallback.runConcurrently ? fallback.runConcurrently(text) : fallback.run(text));
    return this.#queue.then(run, run);
  }

  /**
   * Runs each line as a transaction of its own, with one marker after the last (so one round
   * trip for them all), and resolves with what nft printed for them: the refused ones' errors,
   * each with its command echoed. Without the process, each line goes to the fallback alone.
   */
  runEach(lines: readonly string[]): Promise<string> {
    return this.#serialized(async () => {
      if (!this.#closed) {
        try {
          const output = await this.#send(lines.join("\n"));
          if (output === "" || isNftError(output)) return output;
          this.#giveUp(`unexpected output: ${output.slice(0, 200)}`);
        } catch (e) {
          if (!(e instanceof ProtocolFailure)) throw e;
          this.#giveUp(e.message);
        }
      }
      let output = "";
      for (const line of lines) {
        try {
          await this.#fallback.run(`${line}\n`);
        } catch (e) {
          // Only nft's refusal of this very command is an answer; anything else is a failure.
          if (!(e instanceof CommandFailed) || !e.stderr.includes(line)) throw e;
          output += e.stderr;
        }
      }
      return output;
    });
  }

  check(text: string): Promise<void> {
    return this.#fallback.check(text);
  }

  list(family: NftFamily, table: string, what: NftListing): Promise<Buffer | undefined> {
    return this.#fallback.list(family, table, what);
  }

  /**
   * Starts `nft -i` if it is not running, so that the next change does not wait for the process
   * to start (10–40 ms). A failure only means the next transaction starts it again.
   */
  prepare(): Promise<void> {
    if (this.#closed || this.#child) return Promise.resolve();
    return this.#serialized(async () => {
      if (this.#closed || this.#child) return;
      try {
        const output = await this.#send("");
        if (output !== "") this.#giveUp(`unexpected output: ${output.slice(0, 200)}`);
      } catch (e) {
        if (!(e instanceof ProtocolFailure)) throw e;
        this.#giveUp(e.message);
      }
    });
  }

  /** Ends the process; later transactions go to the fallback. */
  close(): void {
    this.#closed = true;
    this.#kill();
    this.#fallback.close?.();
  }

  /** Runs `fn` after every earlier transaction has settled: nft sees one at a time. */
  #serialized<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.#queue.then(fn, fn);
    this.#queue = result.catch(() => {});
    return result;
  }

  /** Writes one transaction line and its marker; resolves with nft's stderr output for it. */
  #send(line: string): Promise<string> {
    const child = this.#child ?? this.#start();
    const marker = markerCommand(++this.#seq);
    return new Promise<string>((resolve, reject) => {
      const deadline = answerDeadline(this.#timeoutMs, () =>
        reject(new ProtocolFailure(`no reply within ${this.#timeoutMs} ms`)),
      );
      this.#pending = {
        marker,
        resolve: (out) => {
          deadline.clear();
          resolve(out);
        },
        reject: (e) => {
          deadline.clear();
          reject(e);
        },
      };
      child.stdin.write(`${line}\n${marker}\n`);
    }).finally(() => {
      this.#pending = undefined;
    });
  }

  #start(): ChildProcessWithoutNullStreams {
    const [cmd = "nft", ...args] = this.#command;
    // Its own process group, killed whole; `error` is handled before the pipes are touched.
    let started: ReturnType<typeof spawnCommand>;
    try {
      started = spawnCommand([cmd, ...args, "-i"], { stdin: "pipe" });
    } catch (e) {
      throw new ProtocolFailure((e as Error).message);
    }
    if (started.pid === undefined || !started.stdin || !started.stdout || !started.stderr) {
      // Not started (EMFILE, ENOENT, …): the `error` event follows and is already handled.
      throw new ProtocolFailure(`nft -i could not start`);
    }
    const child = started as ChildProcessWithoutNullStreams;
    this.#child = child;
    this.#stderr = "";
    child.stdout.resume(); // nothing is expected there; never let the pipe fill up
    child.stderr.on("data", (b: Buffer) => {
      if (this.#child !== child) return;
      this.#stderr += b.toString();
      this.#onStderr();
    });
    const died = (why: string) => {
      if (this.#child !== child) return;
      this.#child = undefined;
      this.#pending?.reject(new ProtocolFailure(why));
    };
    child.on("error", (e) => died(`nft -i failed: ${e.message}`));
    child.on("exit", (code, signal) => died(`nft -i exited (${signal ?? code})`));
    return child;
  }

  #onStderr(): void {
    const p = this.#pending;
    if (!p) {
      if (this.#stderr.trim() !== "")
        this.#giveUp(`output outside a transaction: ${this.#stderr.slice(0, 200)}`);
      return;
    }
    const scan = scanForMarker(this.#stderr, p.marker);
    if (!scan.done) {
      if (this.#stderr.length > 1024 * 1024) p.reject(new ProtocolFailure("no marker in 1 MiB of output"));
      return;
    }
    this.#stderr = scan.rest;
    p.resolve(scan.output);
  }

  #giveUp(reason: string): void {
    this.#onRestart(reason);
    this.#kill();
  }

  #kill(): void {
    const child = this.#child;
    this.#child = undefined;
    if (!child) return;
    child.stdin.destroy();
    stopCommand(child);
  }
}

function firstError(output: string): string {
  return output.split("\n").find((l) => l.startsWith("Error:")) ?? "unknown error";
}
