// Fault: `--sync-period 0` was accepted; the nft sync loop then resynced in a busy loop at 100%
// CPU and never let SIGTERM in.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, test } from "node:test";

const ROOT = join(import.meta.dirname, "..", "..");

function kpng(args: string[], timeoutMs: number): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(ROOT, "src", "cli", "main.ts"), ...args], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (t: string) => {
      stderr += t;
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`still running after ${timeoutMs} ms; stderr: ${stderr.slice(0, 500)}`));
    }, timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe("fault: --sync-period 0", () => {
  for (const period of ["0", "0s", "500ms"]) {
    test(`to-nft --sync-period ${period} is rejected with exit 2`, { timeout: 20_000 }, async () => {
      const { code, stderr } = await kpng(
        [
          "file",
          "--input",
          join(ROOT, "examples", "cluster.yaml"),
          "to-local",
          "to-nft",
          "--node-name",
          "node-1",
          "--sync-period",
          period,
          "--dry-run",
        ],
        15_000,
      );
      assert.equal(code, 2, stderr);
      assert.match(stderr, /--sync-period: .*too short/);
    });
  }
});
