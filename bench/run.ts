// Runs every benchmark in bench/ one after the other, each in its own process so that one's heap
// does not weigh on the next. `npm run bench [-- name …]` runs only the named ones.

import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const wanted = process.argv.slice(2);
const benches = readdirSync(here)
  .filter((file) => file.endsWith(".ts") && file !== "run.ts")
  .filter((file) => wanted.length === 0 || wanted.some((name) => file.includes(name)))
  .sort();

let failed = 0;
for (const file of benches) {
  console.log(`\n=== ${file} ===`);
  const result = spawnSync(process.execPath, ["--expose-gc", join(here, file)], { stdio: "inherit" });
  if (result.status !== 0) {
    failed++;
    console.log(`${file} exited with ${result.status ?? result.signal}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
