// Fault: `--sync-period 600h` (or `syncPeriod: 1000000h` in a KubeProxyConfiguration, which
// kube-proxy accepts) is longer than the largest timer Node has (2^31-1 ms, about 24.8 days):
// the timer fired after 1 ms instead, ~850 TimeoutOverflowWarning lines a second in a busy loop.
// Every duration is now refused above that bound when it is parsed: exit 2, naming the limit.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { MAX_DURATION_MS, parseDuration } from "../../src/plugin/duration.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const MAIN = join(ROOT, "src", "cli", "main.ts");

function kpng(args: string[]) {
  return spawnSync(process.execPath, [MAIN, ...args], { encoding: "utf8", timeout: 20_000 });
}

describe("fault: durations longer than the largest timer", () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-duration-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("parseDuration refuses what no timer can wait, and accepts the largest one", () => {
    assert.equal(MAX_DURATION_MS, 2 ** 31 - 1);
    assert.equal(parseDuration("596h31m23.647s"), MAX_DURATION_MS);
    assert.throws(() => parseDuration("600h"), /"600h" is too long: it must be at most 596h31m23\.647s/);
    assert.throws(() => parseDuration("1000000h"), /too long/);
  });

  for (const sink of [["to-nft"], ["to-iptables"]])
    test(`${sink[0]} --sync-period 600h exits 2 before anything starts`, () => {
      const r = kpng([
        "file",
        "--input",
        join(ROOT, "examples", "cluster.yaml"),
        "to-local",
        ...sink,
        "--node-name",
        "node-1",
        "--sync-period",
        "600h",
        "--dry-run",
      ]);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, /--sync-period: "600h" is too long/);
      assert.doesNotMatch(r.stderr, /TimeoutOverflowWarning/);
    });

  test("a KubeProxyConfiguration with syncPeriod: 1000000h exits 2 naming the bound", () => {
    const file = join(dir, "config.yaml");
    writeFileSync(
      file,
      "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\nsyncPeriod: 1000000h\n",
    );
    const r = kpng(["kube-proxy", `--config=${file}`, "--hostname-override=node-1"]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /too long: it must be at most 596h31m23\.647s/);
  });
});
