// Runs every benchmark in bench/ one after the other, each in its own process so that one's heap
// does not weigh on the next. `npm run bench [-- name …]` runs only the named ones;
// `npm run bench -- --quick` runs each at 1k services with few rounds (CI does) and every other
// `--flag` is passed on to each benchmark too.

import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
// Flags (--quick: 1k services, few rounds, for CI) go to every benchmark; words pick benchmarks.
const flags = args.filter((a) => a.startsWith("--"));
const wanted = args.filter((a) => !a.startsWith("--"));
const benches = readdirSync(here)
  .filter((file) => file.endsWith(".ts") && file !== "run.ts")
  .filter((file) => wanted.length === 0 || wanted.some((name) => file.includes(name)))
  .sort();

let failed = 0;
const started = performance.now();
const times: [string, number][] = [];
for (const file of benches) {
  console.log(`\n=== ${file} ===`);
  const t0 = performance.now();
  const result = spawnSync(process.execPath, ["--expose-gc", join(here, file), ...flags], {
    stdio: "inherit",
  });
  times.push([file, (performance.now() - t0) / 1000]);
  if (result.status !== 0) {
    failed++;
    console.log(`${file} exited with ${result.status ?? result.signal}`);
  }
}
console.log(
  `\n${benches.length} benchmarks in ${((performance.now() - started) / 1000).toFixed(1)} s: ${times
    .map(([f, s]) => `${f} ${s.toFixed(1)} s`)
    .join(", ")}`,
);
process.exit(failed === 0 ? 0 : 1);
