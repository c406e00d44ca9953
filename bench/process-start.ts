// A kpng process start: the CLI run on the bundled example (`kpng file --input
// examples/cluster.yaml --no-watch to-local to-json --once`), which is nearly all module loading,
// with Node's compile cache as the executable turns it on (src/cli/main.ts) and without it
// (NODE_DISABLE_COMPILE_CACHE=1). Runs alternate; CPU is the child's user + system time, peak RSS
// its VmHWM read from /proc while it runs. Medians.
//
//   node bench/process-start.ts [--runs=10] [--quick]

import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { measured } from "./lib/measured.ts";
import { flagValue, quick, table } from "./lib/table.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const ARGS = [
  join(root, "src/cli/main.ts"),
  "file",
  "--input",
  join(root, "examples/cluster.yaml"),
  "--no-watch",
  "to-local",
  "to-json",
  "--node-name",
  "n1",
  "--once",
];

function run(cache: boolean) {
  const env = { ...process.env };
  delete env.NODE_COMPILE_CACHE;
  if (cache) delete env.NODE_DISABLE_COMPILE_CACHE;
  else env.NODE_DISABLE_COMPILE_CACHE = "1";
  return measured(ARGS, { env, stderr: "ignore" });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

const runs = Number(flagValue("runs") ?? (quick ? 3 : 10));
await run(true); // fills the cache
const samples = {
  without: [] as Awaited<ReturnType<typeof run>>[],
  with: [] as Awaited<ReturnType<typeof run>>[],
};
for (let i = 0; i < runs; i++) {
  samples.without.push(await run(false));
  samples.with.push(await run(true));
}
console.log(`kpng process start (the bundled example), median of ${runs} alternating runs\n`);
console.log(
  table(
    ["compile cache", "CPU ms", "wall ms", "peak RSS MiB"],
    (["without", "with"] as const).map((k) => [
      k,
      median(samples[k].map((s) => s.cpuMs)).toFixed(0),
      median(samples[k].map((s) => s.wallMs)).toFixed(0),
      median(samples[k].map((s) => s.peakRssMiB)).toFixed(0),
    ]),
  ),
);
