// deploy/kube-proxy-replacement/ must agree with the image, with kubeadm's ConfigMap and with the
// CLI: the command is the image's entry point plus `kube-proxy` and flags the CLI accepts, --config
// names config.conf inside the ConfigMap's mount, and the whole command line reaches kube → to-nft.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parse } from "yaml";
import type { Invocation } from "../../../src/cli/invocation.ts";
import { acceptsFlag } from "../../../src/cli/kube-proxy.ts";
import { globalSinks, localSinks, localSources, sources } from "../../../src/cli/plugins.ts";
import { buildProgram } from "../../../src/cli/program.ts";
import { toKpngArgv } from "../../../src/kube-proxy-compat/argv.ts";
import { readKubeProxyConfig } from "../../../src/kube-proxy-compat/config-file.ts";
import { parseKubeProxyFlags } from "../../../src/kube-proxy-compat/flags.ts";
import { translate } from "../../../src/kube-proxy-compat/translate.ts";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const DIR = join(ROOT, "deploy", "kube-proxy-replacement");
// biome-ignore lint/suspicious/noExplicitAny: manifests are free-form YAML, checked field by field below.
type Manifest = any;
const load = (file: string): Manifest => parse(readFileSync(join(DIR, file), "utf8"));

/** The keys of kubeadm's kube-proxy ConfigMap. */
const KUBEADM_CONFIGMAP = { name: "kube-proxy", keys: ["config.conf", "kubeconfig.conf"] };
const KUBEADM_CONFIG = readFileSync(
  join(ROOT, "test", "unit", "kube-proxy-compat", "fixtures", "kubeadm-config.conf"),
  "utf8",
);

const daemonSet = load("daemonset.yaml");
const pod = daemonSet.spec.template.spec;
const container = pod.containers[0];
const entrypoint = JSON.parse(
  (readFileSync(join(ROOT, "deploy", "Dockerfile"), "utf8").match(/^ENTRYPOINT (.*)$/m) ?? [])[1] ?? "[]",
) as string[];

function program(run: (i: Invocation) => Promise<void> = async () => {}) {
  return buildProgram({ sources, localSinks, globalSinks, localSources }, run, {
    configure: (root) => root.exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} }),
  });
}

describe("deploy/kube-proxy-replacement", () => {
  it("is kubeadm's kube-proxy DaemonSet: same name, service account and ConfigMap", () => {
    assert.equal(daemonSet.metadata.name, "kube-proxy");
    assert.equal(daemonSet.metadata.namespace, "kube-system");
    assert.equal(pod.serviceAccountName, "kube-proxy");
    assert.equal(container.name, "kube-proxy");
    assert.equal(pod.hostNetwork, true);
    const volume = pod.volumes.find((v: Manifest) => v.configMap !== undefined);
    assert.equal(volume.configMap.name, KUBEADM_CONFIGMAP.name);
    assert.equal(volume.configMap.items, undefined, "every key of the ConfigMap, as is");
  });

  it("runs the image's entry point with `kube-proxy`, --config inside the ConfigMap's mount", () => {
    assert.deepEqual(container.command.slice(0, entrypoint.length), entrypoint);
    assert.equal(container.command[entrypoint.length], "kube-proxy");
    const flags = parseKubeProxyFlags(container.command.slice(entrypoint.length + 1));
    const volume = pod.volumes.find((v: Manifest) => v.configMap?.name === KUBEADM_CONFIGMAP.name);
    const mount = container.volumeMounts.find((m: Manifest) => m.name === volume.name);
    assert.equal(flags.configFile, `${mount.mountPath}/config.conf`);
    assert.ok(KUBEADM_CONFIGMAP.keys.includes("config.conf"));
    assert.equal(flags.overrides.get("hostnameOverride"), "$(NODE_NAME)");
    const env = container.env.find((e: Manifest) => e.name === "NODE_NAME");
    assert.equal(env.valueFrom.fieldRef.fieldPath, "spec.nodeName");
  });

  it("kubeadm's config (mode nftables) with the manifest's flags becomes a command line the CLI runs", async () => {
    const flags = parseKubeProxyFlags(
      container.command.slice(entrypoint.length + 1).map((a: string) => a.replace("$(NODE_NAME)", "node-1")),
    );
    const { values } = readKubeProxyConfig(
      KUBEADM_CONFIG.replace(/^mode: ""$/m, "mode: nftables"),
      "config.conf",
    );
    const root = program();
    const { argv } = toKpngArgv(translate(values, flags), (plugin, flag) => acceptsFlag(root, plugin, flag));
    const seen: Invocation[] = [];
    await program(async (i) => {
      seen.push(i);
    }).parseAsync(argv, { from: "user" });
    const [inv] = seen;
    assert.equal(inv?.form, "to-local");
    if (inv?.form !== "to-local") return;
    assert.equal(inv.source.name, "kube");
    assert.equal(inv.sink.name, "to-nft");
    assert.equal(inv.nodeName, "node-1");
    assert.equal(
      (inv.sourceOpts as { kubeconfig?: string }).kubeconfig,
      "/var/lib/kube-proxy/kubeconfig.conf",
    );
    assert.equal((inv.sinkOpts as { node: { cleanupKubeProxy: boolean } }).node.cleanupKubeProxy, true);
  });

  it("patch.yaml is exactly the DaemonSet's difference from kubeadm's: image and command", () => {
    const patched = load("patch.yaml").spec.template.spec.containers[0];
    assert.deepEqual(Object.keys(patched).sort(), ["command", "image", "name"]);
    assert.equal(patched.name, container.name);
    assert.equal(patched.image, container.image);
    assert.deepEqual(patched.command, container.command);
  });

  it("rollback.yaml gives kube-proxy back its command, after removing kpng's objects of every backend", () => {
    const spec = load("rollback.yaml").spec.template.spec;
    assert.equal(spec.containers[0].name, "kube-proxy");
    assert.equal(spec.containers[0].command[0], "/usr/local/bin/kube-proxy");
    assert.deepEqual(spec.containers[0].command.slice(1), container.command.slice(entrypoint.length + 1));
    assert.deepEqual(spec.initContainers[0].command, [...entrypoint, "cleanup", "all"]);
  });
});
