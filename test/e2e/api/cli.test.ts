// Brain and backend in separate processes through the CLI: what a node gets over the API must
// be exactly what the in-process pipeline computes.

import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { kpngOutput, waitForSocket } from "../../support/kpng-cli.ts";

const cli = ["src/cli/main.ts"];
const input = "examples/cluster.yaml";

const run = (args: string[]) => kpngOutput(args, 20_000);

describe("kpng file … to-api  +  kpng local --api … / kpng api --api …", () => {
  let dir: string;
  let socket: string;
  let brain: ChildProcess;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "kpng-e2e-api-"));
    socket = join(dir, "proxy.sock");
    brain = spawn(
      process.execPath,
      [...cli, "file", "--input", input, "to-api", "--listen", `unix://${socket}`],
      {
        stdio: "ignore",
      },
    );
    await waitForSocket(socket);
  });

  after(async () => {
    brain.kill("SIGTERM");
    await new Promise((r) => brain.once("exit", r));
    await rm(dir, { recursive: true, force: true });
  });

  test("the socket is mode 0600", async () => {
    assert.equal((await stat(socket)).mode & 0o777, 0o600);
  });

  for (const node of ["node-1", "node-2", "node-3", "node-unknown"]) {
    test(`${node}: the remote local state equals the in-process one`, async () => {
      const [inProcess, remote, replicated] = await Promise.all([
        run(["file", "--input", input, "to-local", "to-json", "--node-name", node, "--once"]),
        run(["local", "--api", `unix://${socket}`, "to-json", "--node-name", node, "--once"]),
        run(["api", "--api", `unix://${socket}`, "to-local", "to-json", "--node-name", node, "--once"]),
      ]);
      const expected = JSON.parse(inProcess);
      assert.ok(node === "node-unknown" || expected.services.length > 0);
      // Revisions count changes per producer; the content must be identical.
      assert.deepEqual({ ...JSON.parse(remote), revision: 0 }, { ...expected, revision: 0 });
      assert.ok(expected.serviceCIDRs.length > 0, "the example cluster has Service ranges");
      assert.deepEqual({ ...JSON.parse(replicated), revision: 0 }, { ...expected, revision: 0 });
    });
  }

  // The example has endpoints 198.51.100.8 and 198.51.100.40 in one Service: text order and
  // address order differ, so any second ordering on the way would change the map indexes.
  test("node-1: the nft rules of the remote path are byte-identical to the in-process ones", {
    skip: nftCheckSkipReason(),
  }, async () => {
    // NodePort addresses unset: both paths take the Node object's InternalIPs from the local
    // state (the watch API carries them), and with NodeCIDR its podCIDRs.
    const dryRun = ["to-nft", "--dry-run", "--node-name", "node-1", "--detect-local-mode", "NodeCIDR"];
    const [inProcess, remote] = await Promise.all([
      run(["file", "--input", input, "to-local", ...dryRun]),
      run(["local", "--api", `unix://${socket}`, ...dryRun]),
    ]);
    assert.match(inProcess, /198\.51\.100\.8 \. 8080[\s\S]*198\.51\.100\.40 \. 8080/);
    assert.match(
      inProcess,
      /add element ip kpng nodeport-ips \{ 192\.0\.2\.11\/32 \}/,
      "node-1's InternalIP",
    );
    assert.match(inProcess, /add element ip kpng pod-cidrs \{ 198\.51\.100\.0\/28 \}/, "node-1's podCIDR");
    assert.equal(remote, inProcess);
  });
});

/** `--dry-run` checks its rules with `nft --check`, which needs nft and CAP_NET_ADMIN. */
function nftCheckSkipReason(): string | false {
  if (process.getuid?.() !== 0) return "needs root for nft --check";
  const found = spawnSync("nft", ["--version"], { stdio: "ignore" });
  return found.status === 0 ? false : "needs the nft command";
}

describe("the default listener", {
  skip: process.getuid?.() === 0 ? false : "needs root for /run/kpng",
}, () => {
  test("to-api without --listen serves a 0600 unix socket in /run/kpng, and kpng local finds it without --api", async () => {
    const socket = "/run/kpng/proxy.sock";
    const brain = spawn(process.execPath, [...cli, "file", "--input", input, "to-api"], { stdio: "ignore" });
    try {
      await waitForSocket(socket);
      assert.equal((await stat(socket)).mode & 0o777, 0o600);
      const state = JSON.parse(await run(["local", "to-json", "--node-name", "node-1", "--once"]));
      assert.ok(state.services.length > 0);
    } finally {
      brain.kill("SIGTERM");
      await new Promise((r) => brain.once("exit", r));
    }
  });
});
