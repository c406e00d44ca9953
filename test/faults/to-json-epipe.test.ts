// Fault: `kpng … to-json` into a pipe whose reader had exited crashed with an EPIPE stack trace
// and exit code 1, where a dump whose reader is gone is simply over.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, test } from "node:test";

const ROOT = join(import.meta.dirname, "..", "..");
const MAIN = join(ROOT, "src", "cli", "main.ts");
const EXAMPLE = join(ROOT, "examples", "cluster.yaml");

function runWithClosedStdout(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.destroy(); // the reader is gone before the first document
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (t: string) => {
      stderr += t;
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`did not exit; stderr: ${stderr}`));
    }, 15_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe("fault: to-json into a closed pipe", () => {
  for (const args of [
    ["file", "--input", EXAMPLE, "to-json"],
    ["file", "--input", EXAMPLE, "to-local", "to-json", "--node-name", "node-1"],
  ]) {
    test(`kpng ${args.slice(3).join(" ")} exits quietly with 0`, { timeout: 20_000 }, async () => {
      const { code, stderr } = await runWithClosedStdout(args);
      assert.doesNotMatch(stderr, /EPIPE|at .*\.ts:\d+/);
      assert.equal(code, 0, stderr);
    });
  }
});
