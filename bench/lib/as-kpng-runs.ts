// A benchmark that runs kpng's code in its own process measures that process: it must run as
// bin/kpng and the image run kpng, with malloc on huge pages (src/host/huge-page-malloc.ts), or
// the page faults it counts, and their CPU, are not kpng's. The tunable is read when the process
// starts, so a benchmark started without it runs itself again with it.

import { spawnSync } from "node:child_process";
import { withHugePageMalloc } from "../../src/host/huge-page-malloc.ts";

/** Returns when this process runs as kpng does; otherwise runs it again so, and exits with it. */
export function runAsKpngRuns(): void {
  const env = withHugePageMalloc(process.env);
  if (env === process.env) return;
  const again = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    env,
    stdio: "inherit",
  });
  process.exit(again.status ?? 1);
}
