// Fault: a hung `nft -f` (after the `nft -i` deadline) or a hung `iptables-restore` held kpng at
// SIGTERM for 20–86 s: shutdown killed only the direct child, then waited for pipes that the
// child's own child still held; one outlived kpng. Here the fake commands are shell scripts that
// run `sleep` as a child (no exec): killing the shell alone leaves the pipes held. SIGTERM must
// end kpng within 5 s, and no process the command started may survive it.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { eventually } from "../support/eventually.ts";

const MAIN = join(import.meta.dirname, "..", "..", "src", "cli", "main.ts");

/** The pids of processes whose command line contains `marker`. */
async function processesWith(marker: string): Promise<number[]> {
  const out: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    if (cmdline.split("\0").join(" ").includes(marker)) out.push(Number(entry));
  }
  return out;
}

/** A script that hangs in a child `sleep <seconds>` when its arguments match `hangOn`. */
function hangingScript(seconds: number, hangOn: string): string {
  return `#!/bin/sh
case "$*" in
  ${hangOn}) sleep ${seconds} ;;
  *list*) echo "Error: No such file or directory" >&2; exit 1 ;;
  *) exit 0 ;;
esac
`;
}

const cases = [
  {
    name: "nft -f (and nft -i) hang",
    seconds: 3171,
    binaries: ["nft"],
    hangOn: "*-f*|*-i*",
    sink: ["to-nft"],
  },
  {
    name: "iptables-restore hangs",
    seconds: 3172,
    binaries: [
      "iptables-nft-restore",
      "ip6tables-nft-restore",
      "iptables-nft-save",
      "ip6tables-nft-save",
      "iptables-nft",
      "ip6tables-nft",
    ],
    hangOn: "*--noflush*",
    sink: ["to-iptables", "--iptables-mode", "nft"],
  },
];

describe("fault: SIGTERM while an external command hangs with a child holding its pipes", () => {
  for (const c of cases)
    test(`${c.name}: kpng exits within 5 s, and no process of the command survives`, {
      timeout: 60_000,
    }, async () => {
      const dir = await mkdtemp(join(tmpdir(), "kpng-fault-exec-"));
      const marker = `sleep ${c.seconds}`;
      try {
        for (const b of c.binaries) {
          await writeFile(join(dir, b), hangingScript(c.seconds, c.hangOn));
          await chmod(join(dir, b), 0o755);
        }
        const cluster = join(dir, "cluster.yaml");
        await writeFile(
          cluster,
          `apiVersion: v1
kind: Node
metadata: { name: n1 }
---
apiVersion: v1
kind: Service
metadata: { name: web, namespace: default }
spec: { clusterIP: 198.51.100.10, ports: [{ name: http, port: 80, protocol: TCP }] }
`,
        );
        const child = spawn(
          process.execPath,
          [
            MAIN,
            "file",
            "--input",
            cluster,
            "to-local",
            ...c.sink,
            "--node-name",
            "n1",
            "--nodeport-addresses",
            "192.0.2.0/24",
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--healthz-bind-address",
            "127.0.0.1:0",
          ],
          {
            stdio: ["ignore", "ignore", "pipe"],
            env: { ...process.env, PATH: `${dir}:${process.env.PATH}` },
          },
        );
        let stderr = "";
        child.stderr.setEncoding("utf8").on("data", (t: string) => {
          stderr += t;
        });
        const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
        await eventually(async () => (await processesWith(marker)).length > 0, "the command to hang", 20_000);
        const sent = performance.now();
        child.kill("SIGTERM");
        await exited;
        const took = performance.now() - sent;
        assert.ok(took < 5000, `exited ${Math.round(took)} ms after SIGTERM; stderr: ${stderr}`);
        // The kernel may take a moment to reap what was killed at exit.
        await eventually(async () => (await processesWith(marker)).length === 0, "no survivor", 1000).catch(
          () => {},
        );
        const survivors = await processesWith(marker);
        for (const pid of survivors) process.kill(pid, "SIGKILL");
        assert.deepEqual(survivors, [], `processes outlived kpng; stderr: ${stderr}`);
      } finally {
        for (const pid of await processesWith(marker)) process.kill(pid, "SIGKILL");
        await rm(dir, { recursive: true, force: true });
      }
    });
});
