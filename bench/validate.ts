// Validation alone: every object of the benchmarks' cluster file (bench/lib/cluster.ts, N
// Services × 10 endpoints) through parseKubeObject, as the file source validates them, in passes
// over the objects parsed once. Per size: the CPU ms of a pass, min and median.
//
//   node bench/validate.ts [--sizes=100000] [--passes=7] [--quick]

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseKubeObject } from "../src/model/validate.ts";
import { writeClusterFile } from "./lib/cluster.ts";
import { flagValue, quick, sizesFlag, table } from "./lib/table.ts";

const cpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

const passes = Number(flagValue("passes") ?? (quick ? 2 : 7));
const rows: string[][] = [];
const work = mkdtempSync(join(tmpdir(), "kpng-validate-"));
try {
  for (const services of sizesFlag([100_000])) {
    const file = writeClusterFile({ services, endpointsPerService: 10 }, work);
    const items = (JSON.parse(readFileSync(file, "utf8")) as { items: unknown[] }).items;
    rmSync(file);
    const times: number[] = [];
    let valid = 0;
    for (let p = 0; p < passes; p++) {
      valid = 0;
      const t = cpuMs();
      for (const raw of items) if (parseKubeObject(raw).ok) valid++;
      times.push(cpuMs() - t);
    }
    times.sort((a, b) => a - b);
    rows.push([
      String(services),
      String(valid),
      (times[0] ?? 0).toFixed(0),
      (times[Math.floor(times.length / 2)] ?? 0).toFixed(0),
    ]);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
console.log(`validation of the cluster file's objects, ${passes} passes; CPU ms of a pass\n`);
console.log(table(["services", "valid objects", "min ms", "median ms"], rows));
