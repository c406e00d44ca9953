// An idle kpng wakes up rarely: the metrics port's event loop sampling is the one timer that
// runs while nothing changes. Measured in real time, in a child process of its own.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, it } from "node:test";

describe("an idle metrics port", () => {
  // The main thread's voluntary context switches over an idle window: each is the event loop
  // waking up (a timer, an event). Counted in a child process of its own, whatever the load.
  it("wakes the event loop a few times a second, not a hundred", async () => {
    const child = spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `
        import { readFileSync } from "node:fs";
        import { setTimeout as sleep } from "node:timers/promises";
        import { startMetricsServer } from ${JSON.stringify(new URL("../../../src/node/metrics-server.ts", import.meta.url).href)};
        import { close } from ${JSON.stringify(new URL("../../../src/observability/http-listen.ts", import.meta.url).href)};
        const switches = () =>
          Number(/voluntary_ctxt_switches:\\s+(\\d+)/.exec(readFileSync(\`/proc/self/task/\${process.pid}/status\`, "utf8"))[1]);
        const server = await startMetricsServer("127.0.0.1", 0, "nftables");
        await sleep(500);
        const before = switches();
        await sleep(2000);
        const wakeups = switches() - before;
        await close(server);
        console.log(wakeups);
        `,
      ],
      { encoding: "utf8", timeout: 30_000 },
    );
    assert.equal(child.status, 0, child.stderr);
    const wakeups = Number(child.stdout.trim());
    // 2 s at one sample per 100 ms is 20; the default 10 ms gives about 200.
    assert.ok(wakeups < 60, `${wakeups} wake-ups of an idle event loop in 2 s`);
  });
});
