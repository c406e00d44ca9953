// The executable turns on Node's compile cache in the installation's own directory before the
// command loads: a second start reads kpng's modules compiled, from `.cache/compile`.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../../", import.meta.url));

function start(): { status: number | null; stdout: string; stderr: string } {
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_DEBUG_NATIVE: "COMPILE_CACHE" };
  delete env.NODE_COMPILE_CACHE;
  delete env.NODE_DISABLE_COMPILE_CACHE;
  const run = spawnSync(process.execPath, ["src/cli/main.ts", "--help"], {
    cwd: root,
    env,
    encoding: "utf8",
    timeout: 60_000,
  });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

test("a second start reads the command's modules from the installation's compile cache", () => {
  const first = start();
  assert.equal(first.status, 0, first.stderr);
  const second = start();
  assert.equal(second.status, 0, second.stderr);
  assert.match(second.stdout, /^Usage: kpng/);
  const dir = `${root}.cache/compile/`;
  assert.ok(second.stderr.includes(`resolved path ${dir.slice(0, -1)}`), "the cache is the installation's");
  assert.match(second.stderr, /V8 code cache for ESM file:\S+\/src\/cli\/command\.ts was accepted/);
  assert.match(
    second.stderr,
    /retrieving transpile cache for StrippedTypeScript file:\S+\/src\/cli\/command\.ts\.\.\.success/,
  );
});
