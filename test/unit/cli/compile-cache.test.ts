// The executable turns on Node's compile cache in the installation's own directory before the
// command loads: a second start reads kpng's modules compiled, from `.cache/compile`. bin/kpng and
// the image turn it on before Node starts, so that the entry point is read from it too.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../../", import.meta.url));

/** `kpng --help` started as `node src/cli/main.ts`, or by bin/kpng. */
function start(by: "node" | "bin/kpng" = "node"): { status: number | null; stdout: string; stderr: string } {
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_DEBUG_NATIVE: "COMPILE_CACHE" };
  delete env.NODE_COMPILE_CACHE;
  delete env.NODE_DISABLE_COMPILE_CACHE;
  const [command, args] =
    by === "node" ? [process.execPath, ["src/cli/main.ts", "--help"]] : [join(root, "bin/kpng"), ["--help"]];
  const run = spawnSync(command, args, {
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

test("started by bin/kpng, the entry point is read from the cache too: its types are not stripped again", () => {
  const first = start("bin/kpng");
  assert.equal(first.status, 0, first.stderr);
  const second = start("bin/kpng");
  assert.equal(second.status, 0, second.stderr);
  assert.match(
    second.stderr,
    /retrieving transpile cache for StrippedTypeScript file:\S+\/src\/cli\/main\.ts\.\.\.success/,
  );
});

test("the image sets the cache before it fills it, so that its entry point is in it", () => {
  const dockerfile = readFileSync(join(root, "deploy/Dockerfile"), "utf8");
  const set = dockerfile.search(/^ENV NODE_COMPILE_CACHE=\/opt\/kpng\/\.cache\/compile$/m);
  const fill = dockerfile.search(/^RUN node src\/cli\/main\.ts --help/m);
  assert.ok(set >= 0 && fill > set, "ENV NODE_COMPILE_CACHE before the RUN that fills the cache");
  assert.match(dockerfile, /^WORKDIR \/opt\/kpng$/m);
});
