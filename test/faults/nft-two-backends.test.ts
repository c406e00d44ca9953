// Fault: two nft backends on one table both ran, each undoing the other's changes (each trusts
// its own picture of the table).

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { acquireTableLock } from "../../src/backends/nft/table-lock.ts";
import { UsageError } from "../../src/plugin/usage-error.ts";
import { eventually } from "./support.ts";

const ROOT = join(import.meta.dirname, "..", "..");

describe("fault: two nft backends on one table", () => {
  test("the second lock on a table is refused, naming the holder; another table is free; release frees it", async () => {
    const table = `fault-test-${process.pid}`;
    const first = await acquireTableLock(table);
    try {
      await assert.rejects(acquireTableLock(table), (e: Error) => {
        assert.ok(e instanceof UsageError, "exit 2");
        assert.match(e.message, new RegExp(`already programming table "${table}".*pid ${process.pid}:`));
        return true;
      });
      const other = await acquireTableLock(`${table}-other`);
      await other.release();
    } finally {
      await first.release();
    }
    const again = await acquireTableLock(table);
    await again.release();
  });

  test("a second `kpng … to-nft` on the same table exits 2 while the first runs", {
    timeout: 30_000,
  }, async () => {
    const dir = await mkdtemp(join(tmpdir(), "kpng-fault-two-"));
    const table = `fault${process.pid}`;
    // An nft that never answers keeps the first backend busy without touching the kernel.
    await writeFile(join(dir, "nft"), "#!/bin/sh\nexec sleep 60\n");
    await chmod(join(dir, "nft"), 0o755);
    const cluster = join(dir, "cluster.yaml");
    await writeFile(cluster, "apiVersion: v1\nkind: Node\nmetadata: { name: n1 }\n");
    const start = () => {
      const child = spawn(
        process.execPath,
        [
          join(ROOT, "src", "cli", "main.ts"),
          "file",
          "--input",
          cluster,
          "to-local",
          "to-nft",
          "--node-name",
          "n1",
          "--nodeport-addresses",
          "192.0.2.0/24",
          "--table-name",
          table,
        ],
        { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } },
      );
      const run = {
        child,
        stderr: "",
        exited: new Promise<number | null>((r) => child.on("exit", (c) => r(c))),
      };
      child.stderr.setEncoding("utf8").on("data", (t: string) => {
        run.stderr += t;
      });
      return run;
    };
    const first = start();
    try {
      await eventually(() => first.stderr.includes('"msg":"starting"'), "the first backend started", 15_000);
      const second = start();
      assert.equal(await second.exited, 2, second.stderr);
      assert.match(second.stderr, new RegExp(`already programming table "${table}".*pid ${first.child.pid}`));
    } finally {
      first.child.kill("SIGTERM");
      await first.exited;
      await rm(dir, { recursive: true, force: true });
    }
  });
});
