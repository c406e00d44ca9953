// Fault: `--config /dev/zero` grew to 24 GB and ignored SIGTERM until the OOM killer came;
// `--input /dev/zero` grew ~400 MB/s; `--input` a FIFO with no writer blocked for ever, stopped
// only by SIGKILL. Now only regular files are read, each under a size limit (`--config`: 1 MiB;
// `--input`: 512 MiB, raised with --max-input-size): the rest is refused at once, exit non-zero.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";

const ROOT = join(import.meta.dirname, "..", "..");
const MAIN = join(ROOT, "src", "cli", "main.ts");
const CLUSTER = join(ROOT, "examples", "cluster.yaml");

/** Runs kpng with an address-space cap, so a runaway read fails fast instead of eating the host. */
function kpng(args: string[], timeoutMs = 15_000) {
  return spawnSync(
    "bash",
    ["-c", 'ulimit -v 4000000 && exec "$@"', "kpng", process.execPath, MAIN, ...args],
    {
      encoding: "utf8",
      timeout: timeoutMs,
    },
  );
}

describe("fault: unbounded inputs", () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-inputs-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("--config /dev/zero exits 2 at once, naming the problem", () => {
    const started = performance.now();
    const r = kpng(["kube-proxy", "--config=/dev/zero", "--hostname-override=n1"]);
    assert.equal(r.status, 2, `status ${r.status} signal ${r.signal}; ${r.stderr}`);
    assert.match(r.stderr, /--config: .*\/dev\/zero is not a regular file/);
    assert.ok(performance.now() - started < 10_000);
  });

  test("--config larger than 1 MiB is refused", () => {
    const big = join(dir, "big.yaml");
    writeFileSync(big, `# ${"x".repeat(2 * 1024 * 1024)}\n`);
    const r = kpng(["kube-proxy", `--config=${big}`, "--hostname-override=n1"]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--config: .*is 2097155 bytes, more than 1048576/);
  });

  for (const sink of ["to-json"])
    test(`--input /dev/zero (${sink}) exits non-zero at once`, () => {
      const r = kpng(["file", "--input", "/dev/zero", "--no-watch", sink]);
      assert.notEqual(r.status, 0, r.stderr);
      assert.equal(r.signal, null, `killed by ${r.signal}: ${r.stderr.slice(0, 300)}`);
      assert.match(r.stderr, /\/dev\/zero is not a regular file/);
    });

  test("--input larger than --max-input-size is refused; a larger limit reads it", () => {
    const sparse = join(dir, "sparse.yaml");
    writeFileSync(sparse, "");
    truncateSync(sparse, 2 * 1024 * 1024);
    const r = kpng(["file", "--input", sparse, "--no-watch", "--max-input-size", "1Mi", "to-json"]);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /is 2097152 bytes, more than 1048576 \(--max-input-size\)/);
    const ok = kpng(["file", "--input", CLUSTER, "--max-input-size", "1Mi", "to-json", "--once"]);
    assert.equal(ok.status, 0, ok.stderr);
  });

  test("--input a FIFO with no writer is refused at once; SIGTERM is never needed", async () => {
    const fifo = join(dir, "fifo");
    spawnSync("mkfifo", [fifo]);
    const child = spawn(process.execPath, [MAIN, "file", "--input", fifo, "to-json"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (t: string) => {
      stderr += t;
    });
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      child.on("exit", (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    assert.notEqual(code, null, "killed: it blocked");
    assert.notEqual(code, 0);
    assert.match(stderr, /is not a regular file/);
  });
});
