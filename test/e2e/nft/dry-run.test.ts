// `to-nft --dry-run` through the CLI with the real nft: the rules are applied in a namespace of
// the run's own, printed, and nothing is left on the node: no rules, no namespace.

import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { kpngRun } from "../../support/kpng-cli.ts";
import { Netns, netnsSkipReason, runCommand } from "../../support/netns.ts";

const skip = await netnsSkipReason();

const DRY_RUN = [
  "file",
  "--input",
  "examples/cluster.yaml",
  "--no-watch",
  "to-local",
  "to-nft",
  "--node-name",
  "node-1",
  "--dry-run",
];

/** The dry run inside `ns`, standing for the node. */
const dryRunIn = (ns: Netns) => kpngRun(DRY_RUN, { netns: ns.name });

const dryRunNamespaces = () => {
  try {
    return readdirSync("/run/netns").filter((n) => n.startsWith("kpng-dry-run-"));
  } catch {
    return [];
  }
};

describe("to-nft --dry-run with the real nft", { skip }, () => {
  let node: Netns;
  let replay: Netns;
  before(async () => {
    node = await Netns.create();
    replay = await Netns.create();
  });
  after(async () => {
    await node?.destroy();
    await replay?.destroy();
  });

  test("prints rules that a fresh node applies, and leaves no rules and no namespace behind", async () => {
    const before = dryRunNamespaces();
    const { code, out, err } = await dryRunIn(node);
    assert.equal(code, 0, err);
    assert.match(out, /^add table ip kpng$/m);
    assert.match(out, /add element ip kpng nodeport-ips \{ 192\.0\.2\.11\/32 \}/, "node-1's InternalIP");
    // Nothing on the node it ran on.
    const ruleset = await node.exec(["nft", "list", "ruleset"]);
    assert.equal(ruleset.stdout.trim(), "");
    assert.deepEqual(dryRunNamespaces(), before);
    // What it printed is what a fresh node applies, as printed.
    await replay.exec(["nft", "-f", "-"], { stdin: out });
    const table = await replay.exec(["nft", "list", "table", "ip", "kpng"]);
    assert.match(table.stdout, /chain services/);
  });

  test("kpng cleanup nft deletes the namespace of a dry run that was killed, and only that", async () => {
    const dead = "kpng-dry-run-4194304";
    await runCommand(["ip", "netns", "add", dead]);
    try {
      const { code, err } = await kpngRun(["cleanup", "nft"], { netns: node.name });
      assert.equal(code, 0, err);
      assert.ok(!dryRunNamespaces().includes(dead), `${dead} is still there`);
      assert.ok(readdirSync("/run/netns").includes(replay.name), "another namespace is kept");
    } finally {
      await runCommand(["ip", "netns", "delete", dead], { allowFailure: true });
    }
  });

  test("the namespace of a dry run that was killed is deleted by the next one", async () => {
    // A pid no process has: pid_max is at most 2^22.
    const dead = "kpng-dry-run-4194305";
    await runCommand(["ip", "netns", "add", dead]);
    try {
      const { code, err } = await dryRunIn(node);
      assert.equal(code, 0, err);
      assert.ok(!dryRunNamespaces().includes(dead), `${dead} is still there`);
    } finally {
      await runCommand(["ip", "netns", "delete", dead], { allowFailure: true });
    }
  });
});
