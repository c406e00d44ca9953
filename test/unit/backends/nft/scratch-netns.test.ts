import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import {
  type RunCommand,
  removeLeftoverScratchNetns,
  ScratchNetns,
} from "../../../../src/backends/nft/scratch-netns.ts";
import type { ExecResult } from "../../../../src/host/exec.ts";

const ok: ExecResult = { code: 0, stdout: "", stderr: "", signal: null, timedOut: false };

/** Records every command; `answer` decides each one's result. */
function recording(answer: (argv: readonly string[]) => ExecResult = () => ok): {
  run: RunCommand;
  ran: string[];
} {
  const ran: string[] = [];
  return {
    ran,
    run: async (argv) => {
      ran.push(argv.join(" "));
      return answer(argv);
    },
  };
}

describe("ScratchNetns: the dry run's own network namespace", () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-netns-dir-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("is made by ip netns under the run's pid, entered by its path, and deleted", async () => {
    const { run, ran } = recording();
    const ns = await ScratchNetns.create({ run, netnsDir: dir, pid: 4242, alive: () => true });
    assert.equal(ns.name, "kpng-dry-run-4242");
    assert.deepEqual(ns.command(["nft", "-f", "-"]), [
      "nsenter",
      `--net=${dir}/kpng-dry-run-4242`,
      "--",
      "nft",
      "-f",
      "-",
    ]);
    await ns.remove();
    assert.deepEqual(ran, ["ip netns add kpng-dry-run-4242", "ip netns delete kpng-dry-run-4242"]);
  });

  test("leftovers: the namespaces of dry runs whose process has ended are deleted, and only those", async () => {
    const left = mkdtempSync(join(tmpdir(), "kpng-netns-dir-"));
    after(() => rmSync(left, { recursive: true, force: true }));
    for (const name of [
      "kpng-dry-run-17",
      "kpng-dry-run-18",
      "kpng-dry-run-4242",
      "kpng-e2e-17-1",
      "kpng-dry-run-x",
    ])
      writeFileSync(join(left, name), "");
    const { run, ran } = recording();
    const kept = await removeLeftoverScratchNetns({
      run,
      netnsDir: left,
      pid: 4242,
      alive: (pid) => pid === 18 || pid === 4242,
    });
    assert.deepEqual(ran, ["ip netns delete kpng-dry-run-17"]);
    assert.deepEqual(kept, []);
  });

  test("a leftover that cannot be deleted is named to the caller, and the others are still deleted", async () => {
    const left = mkdtempSync(join(tmpdir(), "kpng-netns-dir-"));
    after(() => rmSync(left, { recursive: true, force: true }));
    writeFileSync(join(left, "kpng-dry-run-17"), "");
    writeFileSync(join(left, "kpng-dry-run-19"), "");
    const { run, ran } = recording((argv) =>
      argv[3] === "kpng-dry-run-17"
        ? { ...ok, code: 1, stderr: "Cannot remove namespace file: Device busy\n" }
        : ok,
    );
    const kept = await removeLeftoverScratchNetns({ run, netnsDir: left, pid: 4242, alive: () => false });
    assert.deepEqual(ran.sort(), ["ip netns delete kpng-dry-run-17", "ip netns delete kpng-dry-run-19"]);
    assert.deepEqual(kept, ["kpng-dry-run-17"]);
  });

  test("a namespace ip cannot make is an error in ip's own words", async () => {
    const { run } = recording(() => ({
      ...ok,
      code: 1,
      stderr: "mount --make-shared /run/netns failed: Operation not permitted\n",
    }));
    await assert.rejects(
      ScratchNetns.create({ run, netnsDir: dir, pid: 4242 }),
      /ip netns add kpng-dry-run-4242 failed: mount --make-shared \/run\/netns failed: Operation not permitted/,
    );
  });

  test("an ip that hangs past its deadline is an error too", async () => {
    const { run } = recording(() => ({ ...ok, code: 1, signal: "SIGKILL", timedOut: true }));
    await assert.rejects(
      ScratchNetns.create({ run, netnsDir: dir, pid: 4242 }),
      /ip netns add kpng-dry-run-4242 did not finish within 10000 ms/,
    );
  });
});
