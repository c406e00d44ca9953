// Fault: a kubeconfig `exec` credential plugin that never answers stalled the kube source
// silently (40 s and counting, nothing logged): client-node runs it without a deadline, and
// --list-timeout covers only the request. Now the credentials have a deadline and the error
// names the plugin.

import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { applyCredentials } from "../../src/kube/credentials.ts";

const dir = mkdtempSync(join(tmpdir(), "kpng-exec-credential-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("a hung exec credential plugin fails the request after the deadline, naming the plugin", async () => {
  const plugin = join(dir, "hung-credential-plugin");
  writeFileSync(plugin, "#!/bin/sh\nexec sleep 30\n");
  chmodSync(plugin, 0o755);
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: "c", server: "https://192.0.2.1:6443", skipTLSVerify: true }],
    users: [{ name: "u", exec: { apiVersion: "client.authentication.k8s.io/v1", command: plugin } }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  const started = performance.now();
  await assert.rejects(
    applyCredentials(config, {}, 300),
    new RegExp(
      `exec credential plugin \\(${plugin.replace(/[./-]/g, "\\$&")}\\) did not answer within 300 ms`,
    ),
  );
  assert.ok(performance.now() - started < 2000);
});
