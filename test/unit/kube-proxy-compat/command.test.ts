// `kpng kube-proxy` wiring with fakes: what runs, what is reported, what --cleanup does.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pino } from "pino";
import { type KubeProxyCommandDeps, runKubeProxyCommand } from "../../../src/kube-proxy-compat/command.ts";
import { UsageError } from "../../../src/plugin/usage-error.ts";

const CONFIG = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clusterCIDR: 10.244.0.0/16
metricsBindAddress: 0.0.0.0:10249
oddField: 1
`;

function fakes(files: Record<string, string> = { "/cfg": CONFIG }) {
  const lines: { level: number; msg: string; option?: string }[] = [];
  const log = pino({ level: "trace" }, { write: (line: string) => lines.push(JSON.parse(line)) });
  const calls: { ran: (readonly string[])[]; cleanups: number; oom: number[]; level: string[] } = {
    ran: [],
    cleanups: 0,
    oom: [],
    level: [],
  };
  const deps: KubeProxyCommandDeps = {
    log,
    readFile: async (path) => {
      const text = files[path];
      if (text === undefined) throw new Error("ENOENT: no such file");
      return text;
    },
    // This build: the kube source's and to-nft's flags, no health or metrics servers.
    accepts: (_plugin, flag) => !/bind-address|conntrack|hidden/.test(flag),
    runKpng: async (argv) => {
      calls.ran.push(argv);
    },
    cleanup: async () => {
      calls.cleanups += 1;
    },
    setOomScoreAdj: (v) => calls.oom.push(v),
    setLogLevel: (l) => calls.level.push(l),
  };
  return { deps, lines, calls };
}

describe("runKubeProxyCommand", () => {
  it("runs the translated command line and reports what it could not apply", async () => {
    const { deps, lines, calls } = fakes();
    await runKubeProxyCommand(["--config", "/cfg", "--hostname-override=n1", "--v=3"], deps);
    assert.equal(calls.ran.length, 1);
    assert.deepEqual(calls.ran[0]?.slice(0, 4), ["kube", "to-local", "to-nft", "--node-name"]);
    assert.ok(calls.ran[0]?.includes("--cleanup-kube-proxy"));
    assert.deepEqual(calls.oom, [-999]);
    assert.deepEqual(calls.level, ["debug"]);
    const warned = lines.filter((l) => l.level === 40);
    assert.ok(warned.some((l) => /unknown field oddField/.test(l.msg)));
    // Set in the file and not available: a warning; kube-proxy's defaults: info lines.
    assert.ok(warned.some((l) => l.option === "--metrics-bind-address"));
    assert.ok(lines.some((l) => l.level === 30 && l.option === "--healthz-bind-address"));
    assert.ok(!warned.some((l) => l.option === "--healthz-bind-address"));
  });

  it("--cleanup runs the cleanup only", async () => {
    const { deps, calls } = fakes();
    await runKubeProxyCommand(["--cleanup", "--config=/cfg"], deps);
    assert.equal(calls.cleanups, 1);
    assert.equal(calls.ran.length, 0);
  });

  it("an unreadable --config is a usage error naming the file", async () => {
    const { deps, calls } = fakes();
    await assert.rejects(
      runKubeProxyCommand(["--config=/nope"], deps),
      (err: unknown) => err instanceof UsageError && /--config: cannot read \/nope/.test(err.message),
    );
    assert.equal(calls.ran.length, 0);
  });
});
