// One brain serving every service proxy name over the API, backends in other processes each
// asking for their own: what `kpng local --api … --service-proxy-name X` gets must be what the
// in-process `kpng file … to-local … --service-proxy-name X` computes.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { kpngOutput, waitForSocket } from "../../support/kpng-cli.ts";

const cli = ["src/cli/main.ts"];
const input = "examples/cluster.yaml";

const run = (args: string[]) => kpngOutput(args);

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

  /** `kpng … to-json --node-name <node> [more] --once`, in process or from the brain. */
  const inProcess = (node: string, ...more: string[]) =>
    run(["file", "--input", input, "to-local", "to-json", "--node-name", node, ...more, "--once"]);
  const remote = (node: string, ...more: string[]) =>
    run(["local", "--api", `unix://${socket}`, "to-json", "--node-name", node, ...more, "--once"]);

  for (const node of ["node-1", "node-2"]) {
    test(`${node}, --service-proxy-name other-proxy: the remote state equals the in-process one`, async () => {
      const named = ["--service-proxy-name", "other-proxy"];
      const [local, fromBrain] = await Promise.all([inProcess(node, ...named), remote(node, ...named)]);
      const expected = content(local);
      assert.deepEqual(
        expected.services.map((s) => s.name),
        ["mesh-gateway"],
      );
      assert.deepEqual(content(fromBrain), expected);
    });
  }

  test("without --service-proxy-name the remote backend gets the unlabelled Services, as before", async () => {
    const [local, fromBrain, explicit] = await Promise.all([
      inProcess("node-1"),
      remote("node-1"),
      remote("node-1", "--service-proxy-name", ""),
    ]);
    const names = (json: string) => content(json).services.map((s) => s.name);
    assert.ok(names(local).length > 0);
    assert.ok(!names(local).includes("mesh-gateway"));
    assert.deepEqual(names(fromBrain), names(local));
    assert.deepEqual(names(explicit), names(local));
    // The Service IP ranges are left to no single proxy name when the brain serves them all.
    assert.deepEqual({ ...content(fromBrain), serviceCIDRs: [] }, { ...content(local), serviceCIDRs: [] });
  });
});
