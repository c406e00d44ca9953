// One brain serving every service proxy name over the API, backends in other processes each
// asking for their own: what `kpng local --api … --service-proxy-name X` gets must be what the
// in-process `kpng file … to-local … --service-proxy-name X` computes.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

const cli = ["src/cli/main.ts"];
const input = "examples/cluster.yaml";

function run(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...cli, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      err += d;
    });
    const timer = setTimeout(() => child.kill(), 30_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`kpng ${args.join(" ")} exited ${code}: ${err}`));
    });
  });
}

async function waitForSocket(path: string): Promise<void> {
  for (let i = 0; i < 150; i++) {
    if (await stat(path).catch(() => undefined)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${path} never appeared`);
}

/** A to-json state without what counts changes per producer. */
function content(json: string): { services: { name: string }[] } {
  return { ...JSON.parse(json), revision: 0 };
}

describe("kpng file … to-api --every-service-proxy-name  +  kpng local … --service-proxy-name", () => {
  let dir: string;
  let socket: string;
  let brain: ChildProcess;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "kpng-e2e-proxy-name-"));
    socket = join(dir, "proxy.sock");
    brain = spawn(
      process.execPath,
      [
        ...cli,
        "file",
        "--input",
        input,
        "to-api",
        "--listen",
        `unix://${socket}`,
        "--every-service-proxy-name",
      ],
      { stdio: "ignore" },
    );
    await waitForSocket(socket);
  });

  after(async () => {
    brain.kill("SIGTERM");
    await new Promise((r) => brain.once("exit", r));
    await rm(dir, { recursive: true, force: true });
  });

  for (const node of ["node-1", "node-2"]) {
    test(`${node}, --service-proxy-name other-proxy: the remote state equals the in-process one`, async () => {
      const [inProcess, remote] = await Promise.all([
        run([
          "file",
          "--input",
          input,
          "to-local",
          "to-json",
          "--node-name",
          node,
          "--service-proxy-name",
          "other-proxy",
          "--once",
        ]),
        run([
          "local",
          "--api",
          `unix://${socket}`,
          "to-json",
          "--node-name",
          node,
          "--service-proxy-name",
          "other-proxy",
          "--once",
        ]),
      ]);
      const expected = content(inProcess);
      assert.deepEqual(
        expected.services.map((s) => s.name),
        ["mesh-gateway"],
      );
      assert.deepEqual(content(remote), expected);
    });
  }

  test("without --service-proxy-name the remote backend gets the unlabelled Services, as before", async () => {
    const [inProcess, remote, explicit] = await Promise.all([
      run(["file", "--input", input, "to-local", "to-json", "--node-name", "node-1", "--once"]),
      run(["local", "--api", `unix://${socket}`, "to-json", "--node-name", "node-1", "--once"]),
      run([
        "local",
        "--api",
        `unix://${socket}`,
        "to-json",
        "--node-name",
        "node-1",
        "--service-proxy-name",
        "",
        "--once",
      ]),
    ]);
    const names = (json: string) => content(json).services.map((s) => s.name);
    assert.ok(names(inProcess).length > 0);
    assert.ok(!names(inProcess).includes("mesh-gateway"));
    // The Service IP ranges are left to no single proxy name when the brain serves them all.
    assert.deepEqual(names(remote), names(inProcess));
    assert.deepEqual(names(explicit), names(inProcess));
    assert.deepEqual({ ...content(remote), serviceCIDRs: [] }, { ...content(inProcess), serviceCIDRs: [] });
  });
});
