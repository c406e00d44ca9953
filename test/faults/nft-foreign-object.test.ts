// Fault: a foreign object in kpng's own table (here a map named like kpng's dispatch map, of
// another type, as an older version might leave it) failed every IPv4 transaction for ever: kpng
// never recreated its table. Then, after a few refusals in a row, the table was deleted and
// written anew in transactions of their own: every Service without rules until the rewrite
// landed. Now the old table is deleted in the same transaction that writes the new one (up to
// about 20k Services), with a warning and a metric. Real nft in a network namespace of its own.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { NftBackend } from "../../src/backends/nft/backend.ts";
import { ExecNftRunner, type NftRunner } from "../../src/backends/nft/runner.ts";
import { registry } from "../../src/observability/metrics.ts";
import { service, state, V4 } from "../unit/backends/nft/fixtures.ts";
import { capturingLogger, eventually, ManualFeed } from "./support.ts";

const skip = process.getuid?.() !== 0 ? "needs root for a network namespace" : false;

async function resets(): Promise<number> {
  const metric = await registry.getSingleMetric("kpng_sync_resets_total")?.get();
  return metric?.values.find((v) => v.labels.backend === "nftables" && v.labels.family === "ip")?.value ?? 0;
}

describe("fault: a foreign object blocks kpng's table", { skip }, () => {
  test("after repeated refusals kpng replaces its table in one transaction, with a warning", {
    timeout: 30_000,
  }, async () => {
    const ns = `kpng-fault-foreign-${process.pid}`;
    assert.equal(spawnSync("ip", ["netns", "add", ns]).status, 0);
    const nft = (...args: string[]) =>
      spawnSync("ip", ["netns", "exec", ns, "nft", ...args], { encoding: "utf8" });
    const ac = new AbortController();
    let running: Promise<void> | undefined;
    try {
      const older =
        "add table ip kpng; add map ip kpng service-ips { type ipv4_addr : verdict; }; " +
        "add element ip kpng service-ips { 203.0.113.10 : accept }";
      assert.equal(nft(older).status, 0);
      const { log, lines } = capturingLogger();
      const real = new ExecNftRunner(["ip", "netns", "exec", ns, "nft"]);
      const texts: string[] = [];
      const runner: NftRunner = {
        run: (text) => {
          texts.push(text);
          return real.run(text);
        },
        check: (text) => real.check(text),
        list: (family, table, what) => real.list(family, table, what),
      };
      const backend = new NftBackend({ runner, tables: [V4], log });
      const before = await resets();
      const feed = new ManualFeed(state([service()]));
      running = backend.run(feed, ac.signal);
      await eventually(() => lines.some((l) => l.level === 50), "the first failure");
      // Failures at 0, 1 and 3 s; the fourth attempt, at 7 s, starts by deleting the table.
      await eventually(() => backend.health().healthy, "the table written anew", 15_000);
      assert.ok(
        lines.some(
          (l) => l.level === 40 && /writing everything kpng owns in this family anew/.test(String(l.msg)),
        ),
      );
      assert.equal(await resets(), before + 1);
      const deleting = texts.filter((t) => t.includes("delete table"));
      assert.equal(deleting.length, 1);
      assert.ok(deleting[0]?.startsWith("add table ip kpng\ndelete table ip kpng\n"));
      assert.match(
        deleting[0] ?? "",
        /add element ip kpng service-ips \{ 203\.0\.113\.10 \. tcp \. 80 : goto/,
      );
      const map = nft("list", "map", "ip", "kpng", "service-ips");
      assert.equal(map.status, 0, map.stderr);
      assert.match(map.stdout, /203\.0\.113\.10 \. tcp \. 80 : goto/);
    } finally {
      ac.abort();
      await running;
      spawnSync("ip", ["netns", "del", ns]);
    }
  });
});
