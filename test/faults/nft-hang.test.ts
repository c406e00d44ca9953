// Fault: a hung `nft -f` or `nft -j list` stopped every sync with no log line, and SIGTERM took
// effect only when nft returned (75 s later).

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { NftBackend } from "../../src/backends/nft/backend.ts";
import { ExecNftRunner, NftError } from "../../src/backends/nft/runner.ts";
import { silentLogger } from "../../src/observability/log.ts";
import { FakeNft } from "../support/fake-nft.ts";
import { service, state, V4 } from "../unit/backends/nft/fixtures.ts";
import { eventually } from "./support.ts";

const MAIN = join(import.meta.dirname, "..", "..", "src", "cli", "main.ts");
/** An `nft` that never answers; `exec` so that killing it leaves no orphan behind. */
const HUNG_NFT = ["sh", "-c", "exec sleep 60", "nft"];

describe("fault: nft hangs", () => {
  test("nft -f that never returns fails after the deadline, and the process is killed", {
    timeout: 10_000,
  }, async () => {
    const runner = new ExecNftRunner(HUNG_NFT, { timeoutMs: 300 });
    const started = performance.now();
    await assert.rejects(runner.run("add table ip kpng\n"), (e: Error) => {
      assert.ok(e instanceof NftError);
      assert.match(e.message, /did not finish within 300 ms; killed/);
      return true;
    });
    assert.ok(performance.now() - started < 2000);
  });

  test("nft -j list that never returns fails after its deadline", { timeout: 10_000 }, async () => {
    const runner = new ExecNftRunner(HUNG_NFT, { timeoutMs: 60_000, listTimeoutMs: 300 });
    await assert.rejects(runner.list("ip", "kpng", { objects: "sets" }), /did not finish within 300 ms/);
  });

  test("close() kills an nft still running; its call fails at once", { timeout: 10_000 }, async () => {
    const runner = new ExecNftRunner(HUNG_NFT, { timeoutMs: 60_000 });
    const pending = runner.run("add table ip kpng\n");
    setTimeout(() => runner.close(), 100);
    await assert.rejects(pending, /killed/);
  });

  test("the sync loop stops at abort while nft hangs", { timeout: 10_000 }, async () => {
    const nft = new FakeNft();
    nft.hangNext();
    const backend = new NftBackend({ runner: nft, tables: [V4], log: silentLogger });
    const feed = {
      subscribe(listener: (s: ReturnType<typeof state>) => void) {
        listener(state([service()]));
        return () => {};
      },
    };
    const ac = new AbortController();
    const running = backend.run(feed, ac.signal);
    await eventually(() => nft.transactions.length === 1, "the hung transaction started");
    const aborted = performance.now();
    ac.abort();
    await running;
    assert.ok(performance.now() - aborted < 2000);
  });

  test("SIGTERM stops `kpng … to-nft` within 2 s while nft hangs", { timeout: 20_000 }, async () => {
    const dir = await mkdtemp(join(tmpdir(), "kpng-fault-nft-"));
    try {
      const nft = join(dir, "nft");
      await writeFile(nft, "#!/bin/sh\nexec sleep 60\n");
      await chmod(nft, 0o755);
      const cluster = join(dir, "cluster.yaml");
      await writeFile(cluster, "apiVersion: v1\nkind: Node\nmetadata: { name: n1 }\n");
      const child = spawn(
        process.execPath,
        [
          MAIN,
          "file",
          "--input",
          cluster,
          "to-local",
          "to-nft",
          "--node-name",
          "n1",
          "--nodeport-addresses",
          "192.0.2.0/24",
        ],
        { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } },
      );
      let stderr = "";
      child.stderr.setEncoding("utf8").on("data", (t: string) => {
        stderr += t;
      });
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
      await eventually(() => stderr.includes('"msg":"starting"'), "the backend started", 10_000);
      await new Promise((r) => setTimeout(r, 500)); // the first listing is now stuck in the fake nft
      const sent = performance.now();
      child.kill("SIGTERM");
      const code = await exited;
      const took = performance.now() - sent;
      assert.ok(took < 2000, `exited ${Math.round(took)} ms after SIGTERM; stderr: ${stderr}`);
      assert.equal(code, 0, stderr);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
