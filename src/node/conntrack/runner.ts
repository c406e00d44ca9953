// The only place that runs `conntrack`. Deletions go as one batch file (`conntrack -R`), one
// process per cleanup however many filters; every run has a deadline. conntrack opens the file
// by name and a spawned child's stdin is a socket, which /dev/stdin cannot open: the batch goes
// to a private temporary file instead (mode 0600 in a 0700 directory), removed afterwards.

import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface ConntrackRunner {
  /** Runs every line of a batch; resolves with how many entries were deleted. */
  deleteBatch(lines: readonly string[]): Promise<number>;
}

class ConntrackError extends Error {
  override readonly name = "ConntrackError";
}

export class ExecConntrackRunner implements ConntrackRunner {
  readonly #command: readonly string[];
  readonly #timeoutMs: number;

  /** `command` may prefix conntrack, e.g. `["ip", "netns", "exec", "ns1", "conntrack"]`. */
  constructor(options: { command?: readonly string[]; timeoutMs?: number } = {}) {
    this.#command = options.command ?? ["conntrack"];
    this.#timeoutMs = options.timeoutMs ?? 60_000;
  }

  async deleteBatch(lines: readonly string[]): Promise<number> {
    if (lines.length === 0) return 0;
    const dir = await mkdtemp(join(tmpdir(), "kpng-conntrack-"));
    try {
      const file = join(dir, "batch");
      await writeFile(file, `${lines.join("\n")}\n`, { mode: 0o600 });
      return await this.#run(file);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  #run(file: string): Promise<number> {
    const [cmd = "conntrack", ...prefix] = this.#command;
    return new Promise((resolve, reject) => {
      const child = spawn(cmd, [...prefix, "-R", file], {
        stdio: ["ignore", "pipe", "pipe"],
        timeout: this.#timeoutMs,
        killSignal: "SIGKILL",
      });
      let deleted = 0;
      let partial = "";
      let stderr = "";
      // conntrack prints each deleted entry on a line of stdout: count them, keep nothing.
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        const text = partial + chunk;
        const lines = text.split("\n");
        partial = lines.pop() ?? "";
        deleted += lines.filter((l) => l.trim() !== "").length;
      });
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
        if (stderr.length < 4096) stderr += chunk;
      });
      child.on("error", reject);
      child.on("close", (code, signal) => {
        if (partial.trim() !== "") deleted++;
        if (signal !== null)
          reject(new ConntrackError(`conntrack -R killed by ${signal} (timeout ${this.#timeoutMs} ms)`));
        else if (code !== 0)
          reject(new ConntrackError(`conntrack -R exited ${code}: ${stderr.trim().split("\n")[0] ?? ""}`));
        else resolve(deleted);
      });
    });
  }
}
