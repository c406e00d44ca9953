// A kpng process start: the CLI run on the bundled example (`kpng file --input
// examples/cluster.yaml --no-watch to-local to-json --once`), which is nearly all module loading,
// without Node's compile cache (NODE_DISABLE_COMPILE_CACHE=1), with it turned on by
// src/cli/main.ts once it runs (as `node src/cli/main.ts` started by hand: main.ts itself is then
// stripped of its types on every start, which loads Node's TypeScript parser), and with it from
// the start (NODE_COMPILE_CACHE, as bin/kpng and the image set it). Runs alternate; CPU is the
// child's user + system time, peak RSS its VmHWM read from /proc while it runs. Medians.
//
//   node bench/process-start.ts [--runs=10] [--quick]

import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { KPNG_COMPILE_CACHE } from "./lib/cluster.ts";
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

/** How the compile cache is turned on, if at all. */
type Mode = "without" | "by main.ts" | "from the start";
const MODES: readonly Mode[] = ["without", "by main.ts", "from the start"];

function run(mode: Mode) {
  const env = { ...process.env };
  delete env.NODE_COMPILE_CACHE;
  delete env.NODE_DISABLE_COMPILE_CACHE;
  if (mode === "without") env.NODE_DISABLE_COMPILE_CACHE = "1";
  // As bin/kpng and the image set it, so that the entry point is read from the cache too.
  if (mode === "from the start") env.NODE_COMPILE_CACHE = KPNG_COMPILE_CACHE;
  return measured(ARGS, { env, stderr: "ignore" });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

const runs = Number(flagValue("runs") ?? (quick ? 3 : 10));
await run("from the start"); // fills the cache
const samples = new Map<Mode, Awaited<ReturnType<typeof run>>[]>(MODES.map((m) => [m, []]));
for (let i = 0; i < runs; i++) for (const mode of MODES) samples.get(mode)?.push(await run(mode));
console.log(`kpng process start (the bundled example), median of ${runs} alternating runs\n`);
console.log(
  table(
    ["compile cache", "CPU ms", "wall ms", "peak RSS MiB"],
    MODES.map((mode) => {
      const of = samples.get(mode) ?? [];
      return [
        mode,
        median(of.map((s) => s.cpuMs)).toFixed(0),
        median(of.map((s) => s.wallMs)).toFixed(0),
        median(of.map((s) => s.peakRssMiB)).toFixed(0),
      ];
    }),
  ),
);
