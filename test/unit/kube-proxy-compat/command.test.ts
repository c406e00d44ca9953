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
  const calls = {
    ran: [] as (readonly string[])[],
    cleanups: 0,
    inits: 0,
    oom: [] as number[],
    level: [] as string[],
    printed: [] as string[],
    watchers: new Map<string, () => void>(),
    published: [] as { config: Readonly<Record<string, unknown>>; flags: readonly string[] }[],
    /** Set to make runKpng run until release() is called. */
    hold: undefined as Promise<void> | undefined,
  };
  const deps: KubeProxyCommandDeps = {
    log,
    version: "0.1.0",
    readFile: async (path) => {
      const text = files[path];
      if (text === undefined) throw new Error("ENOENT: no such file");
      return text;
    },
    // This build: the kube source's and to-nft's flags, no health or metrics servers.
    accepts: (_plugin, flag) => !/bind-address|conntrack|hidden/.test(flag),
    runKpng: async (argv) => {
      calls.ran.push(argv);
      await calls.hold;
    },
    cleanup: async () => {
      calls.cleanups += 1;
    },
    writeFile: (path, text) => {
      files[path] = text;
    },
    print: (text) => calls.printed.push(text),
    initOnly: async () => {
      calls.inits += 1;
    },
    watchFile: (path, onChange) => {
      calls.watchers.set(path, onChange);
      return () => calls.watchers.delete(path);
    },
    publish: (config, flags) => calls.published.push({ config, flags }),
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

  it("--config with flags that set fields: the flags are ignored, with one warning naming them", async () => {
    const { deps, lines, calls } = fakes();
    await runKubeProxyCommand(["--config=/cfg", "--proxy-mode=iptables", "--masquerade-all"], deps);
    assert.ok(calls.ran[0]?.includes("to-nft"), "the file's mode, not the flag's");
    assert.ok(!calls.ran[0]?.includes("--masquerade-all"));
    const warning = lines.find((l) => /flags ignored because --config is given/.test(l.msg)) as
      | { flags?: string[] }
      | undefined;
    assert.deepEqual(warning?.flags, ["--proxy-mode", "--masquerade-all"]);
  });

  it("a change of the --config file ends the run with an error (so the pod restarts)", async () => {
    const files = { "/cfg": CONFIG };
    const { deps, lines, calls } = fakes(files);
    let release = () => {};
    calls.hold = new Promise((r) => {
      release = r;
    });
    const run = runKubeProxyCommand(["--config=/cfg"], deps);
    await new Promise((r) => setImmediate(r));
    const notify = calls.watchers.get("/cfg");
    assert.ok(notify, "the file is watched");
    notify(); // same content (a touch): nothing happens
    files["/cfg"] = CONFIG.replace("mode: nftables", "mode: iptables");
    notify();
    await assert.rejects(run, /configuration file \/cfg was updated/);
    assert.ok(lines.some((l) => l.level === 50 && /configuration file changed/.test(l.msg)));
    assert.equal(calls.watchers.size, 0, "the watch stops");
    release();
  });

  it("--version prints the version and runs nothing", async () => {
    const { deps, calls } = fakes();
    await runKubeProxyCommand(["--version"], deps);
    assert.match(calls.printed.join(""), /^kpng 0\.1\.0/);
    assert.equal(calls.ran.length, 0);
  });

  it("--write-config-to writes the effective configuration and exits", async () => {
    const files: Record<string, string> = { "/cfg": CONFIG };
    const { deps, calls } = fakes(files);
    await runKubeProxyCommand(["--config=/cfg", "--write-config-to=/out"], deps);
    assert.equal(calls.ran.length, 0);
    const out = files["/out"] ?? "";
    assert.match(out, /^apiVersion: kubeproxy.config.k8s.io\/v1alpha1$/m);
    assert.match(out, /^mode: nftables$/m);
    assert.match(out, /^ {2}maxPerCore: 32768$/m, "defaults are written out");
  });

  it("--init-only runs the set-up only; /configz gets the effective configuration", async () => {
    const { deps, calls } = fakes();
    await runKubeProxyCommand(["--config=/cfg", "--init-only"], deps);
    assert.equal(calls.inits, 1);
    assert.equal(calls.ran.length, 0);
    await runKubeProxyCommand(["--config=/cfg"], deps);
    const published = calls.published[0]?.config as { metricsBindAddress?: string; kind?: string };
    assert.equal(published.kind, "KubeProxyConfiguration");
    assert.equal(published.metricsBindAddress, "0.0.0.0:10249");
    assert.deepEqual(calls.published[0]?.flags, ["--config=/cfg"]);
  });
});
