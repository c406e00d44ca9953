// Lower faults: SIGUSR1/SIGUSR2 ended kpng without a log line; a key written twice in a
// KubeProxyConfiguration passed silently (kube-proxy warns and uses the last value).

import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { readKubeProxyConfig } from "../../src/kube-proxy-compat/config-file.ts";
import { conntrackMissing } from "../../src/node/conntrack/runner.ts";
import { eventually, sleep, startKpng } from "./support.ts";

const ROOT = join(import.meta.dirname, "..", "..");

describe("fault: lower points", () => {
  for (const signal of ["SIGUSR1", "SIGUSR2"] as const)
    test(`${signal} is logged and ignored; kpng keeps running`, { timeout: 30_000 }, async () => {
      const { child, out, exited } = startKpng([
        "file",
        "--input",
        join(ROOT, "examples", "cluster.yaml"),
        "to-json",
      ]);
      try {
        await eventually(() => out.stdout.includes("\n}\n"), "the first document", 15_000);
        child.kill(signal);
        await eventually(() => out.stderr.includes(`"signal":"${signal}"`), "the log line", 5000);
        await sleep(300);
        assert.equal(child.exitCode, null, `exited: ${out.stderr}`);
        assert.match(out.stderr, new RegExp(`"level":40.*"signal":"${signal}".*ignoring signal`));
      } finally {
        child.kill("SIGTERM");
        await exited;
      }
    });

  test("a key written twice in a KubeProxyConfiguration is a warning; the last value wins", () => {
    const read = readKubeProxyConfig(
      "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\nmode: nftables\n",
      "config.yaml",
    );
    assert.equal(read.values.get("mode"), "nftables");
    assert.ok(
      read.warnings.some((w) =>
        /config\.yaml: Map keys must be unique at line 4.*the last value is used/.test(w),
      ),
      read.warnings.join("\n"),
    );
  });
});

test("a missing conntrack is found at start, with the reason", async () => {
  assert.equal(await conntrackMissing(["sh", "-c", "exit 0", "conntrack"]), undefined);
  assert.match((await conntrackMissing(["kpng-no-such-conntrack"])) ?? "", /ENOENT/);
});
