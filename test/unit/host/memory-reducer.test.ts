// kpng runs without V8's memory reducer, whichever way it is started: once the allocation rate
// drops after the first state, the reducer marks the whole heap (the cluster's state, with
// little to free) in the middle of the changes that follow (docs/performance.md).

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { procOfKpng } from "../../support/kpng-proc.ts";

const ROOT = join(fileURLToPath(new URL(".", import.meta.url)), "../../..");
const FLAG = "--no-memory-reducer";

test("bin/kpng starts node without the memory reducer, before kpng's own arguments", async () => {
  const { cmdline } = await procOfKpng(process.env);
  const main = cmdline.findIndex((a) => a.endsWith("src/cli/main.ts"));
  assert.ok(main > 0, `kpng's entry point in ${cmdline.join(" ")}`);
  assert.ok(cmdline.slice(1, main).includes(FLAG), `node's flags: ${cmdline.slice(1, main).join(" ")}`);
});

test("the image's entry point starts node without it", () => {
  const dockerfile = readFileSync(join(ROOT, "deploy/Dockerfile"), "utf8");
  const entrypoint = JSON.parse(/^ENTRYPOINT (.*)$/m.exec(dockerfile)?.[1] ?? "[]") as string[];
  assert.deepEqual(entrypoint, ["node", FLAG, "src/cli/main.ts"]);
});
