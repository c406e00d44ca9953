// deploy/ must hang together: names that reference each other, RBAC that covers every request
// the kube source makes, container args the CLI accepts, and an image entry point that exists.

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import type { Invocation } from "../../../src/cli/invocation.ts";
import { globalSinks, localSinks, localSources, sources } from "../../../src/cli/plugins.ts";
import { buildProgram } from "../../../src/cli/program.ts";
import type { NodeServicesFlags } from "../../../src/node/options.ts";
import { SERVICE_CIDR_PATHS } from "../../../src/sources/kube/service-cidr-api.ts";
import { resourceSpecs, serviceCIDRSpec } from "../../../src/sources/kube/source.ts";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const DEPLOY = join(ROOT, "deploy");

// biome-ignore lint/suspicious/noExplicitAny: manifests are free-form YAML, checked field by field below.
type Manifest = any;

function load(file: string): Manifest[] {
  const docs = parseAllDocuments(readFileSync(join(DEPLOY, file), "utf8"));
  for (const d of docs) assert.deepEqual(d.errors, [], `${file}: YAML errors`);
  return docs.map((d) => d.toJS()).filter((d) => d !== null);
}

function one(manifests: Manifest[], kind: string): Manifest {
  const found = manifests.filter((m) => m.kind === kind);
  assert.equal(found.length, 1, `exactly one ${kind}`);
  return found[0];
}

const rbac = load("rbac.yaml");
const daemonSet = one(load("daemonset.yaml"), "DaemonSet");
const serviceAccount = one(rbac, "ServiceAccount");
const clusterRole = one(rbac, "ClusterRole");
const binding = one(rbac, "ClusterRoleBinding");
const pod = daemonSet.spec.template.spec;
const container = pod.containers[0];

function allows(apiGroup: string, resource: string, verb: string): boolean {
  return clusterRole.rules.some(
    (r: Manifest) =>
      r.apiGroups.includes(apiGroup) && r.resources.includes(resource) && r.verbs.includes(verb),
  );
}

describe("deploy manifests", () => {
  it("the DaemonSet runs as the ServiceAccount the ClusterRoleBinding grants", () => {
    assert.equal(pod.serviceAccountName, serviceAccount.metadata.name);
    assert.equal(daemonSet.metadata.namespace, serviceAccount.metadata.namespace);
    assert.equal(binding.roleRef.kind, "ClusterRole");
    assert.equal(binding.roleRef.name, clusterRole.metadata.name);
    assert.deepEqual(binding.subjects, [
      {
        kind: "ServiceAccount",
        name: serviceAccount.metadata.name,
        namespace: serviceAccount.metadata.namespace,
      },
    ]);
  });

  it("the DaemonSet's selector matches its pod template labels", () => {
    const labels = daemonSet.spec.template.metadata.labels;
    for (const [key, value] of Object.entries(daemonSet.spec.selector.matchLabels)) {
      assert.equal(labels[key], value, `template label ${key}`);
    }
  });

  it("RBAC allows list and watch of every resource the kube source reads", () => {
    const serviceCIDRs = SERVICE_CIDR_PATHS.map((path) => serviceCIDRSpec(path, {}));
    for (const spec of [...resourceSpecs({ nodeName: "n" }), ...serviceCIDRs]) {
      const match = /^\/(?:api\/v1|apis\/([^/]+)\/[^/]+)\/([^/]+)$/.exec(spec.path);
      assert.ok(match, `unexpected path ${spec.path}`);
      const [, group = "", resource = ""] = match;
      for (const verb of ["list", "watch"]) {
        assert.ok(allows(group, resource, verb), `${verb} ${group || "core"}/${resource}`);
      }
    }
  });

  it("RBAC allows creating and patching Events in both event APIs", () => {
    for (const group of ["", "events.k8s.io"]) {
      for (const verb of ["create", "patch"])
        assert.ok(allows(group, "events", verb), `${verb} ${group}/events`);
    }
  });

  it("the pod is a node-critical, host-network proxy that tolerates every taint, without privileged mode", () => {
    assert.equal(pod.hostNetwork, true);
    assert.equal(pod.priorityClassName, "system-node-critical");
    assert.ok(pod.tolerations.some((t: Manifest) => t.operator === "Exists" && t.key === undefined));
    assert.notEqual(container.securityContext.privileged, true);
    for (const cap of ["NET_ADMIN", "NET_RAW"])
      assert.ok(container.securityContext.capabilities.add.includes(cap));
  });

  it("NODE_NAME comes from the downward API and feeds --node-name", () => {
    const env = container.env.find((e: Manifest) => e.name === "NODE_NAME");
    assert.equal(env.valueFrom.fieldRef.fieldPath, "spec.nodeName");
    const i = container.args.indexOf("--node-name");
    assert.equal(container.args[i + 1], "$(NODE_NAME)");
  });

  it("the container args parse with the real CLI into kube → to-local → a backend", async () => {
    const invocations: Invocation[] = [];
    const program = buildProgram(
      { sources, localSinks, globalSinks, localSources },
      async (invocation) => {
        invocations.push(invocation);
      },
      {
        configure: (root) => root.exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} }),
      },
    );
    await program.parseAsync(container.args, { from: "user" });
    const [invocation] = invocations;
    assert.equal(invocation?.form, "to-local");
    if (invocation?.form !== "to-local") return;
    assert.equal(invocation.source.name, "kube");
    assert.equal(invocation.nodeName, "$(NODE_NAME)");
  });

  it("the liveness probe asks /livez on the address the container's health server listens on", async () => {
    const invocations: Invocation[] = [];
    const program = buildProgram(
      { sources, localSinks, globalSinks, localSources },
      async (invocation) => {
        invocations.push(invocation);
      },
      {
        configure: (root) => root.exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} }),
      },
    );
    await program.parseAsync(container.args, { from: "user" });
    const [invocation] = invocations;
    assert.ok(invocation && invocation.form === "to-local");
    const healthz = (invocation.sinkOpts as { node: NodeServicesFlags }).node.healthz;
    assert.ok(healthz, "the health server is on");
    const probe = container.livenessProbe.httpGet;
    assert.equal(probe.path, "/livez");
    assert.equal(probe.port, healthz.port);
    assert.ok(
      healthz.host === "0.0.0.0" || healthz.host === probe.host,
      `${healthz.host} serves ${probe.host}`,
    );
    assert.equal(pod.hostNetwork, true, "127.0.0.1 is the node's loopback only with hostNetwork");
  });
});

describe("Dockerfile", () => {
  const dockerfile = readFileSync(join(DEPLOY, "Dockerfile"), "utf8");
  const instruction = (name: string) =>
    dockerfile.split("\n").find((line) => line.startsWith(`${name} `)) ?? assert.fail(`no ${name}`);

  it("is based on an official Node 24 image and installs the kernel tools", () => {
    assert.match(instruction("FROM"), /^FROM node:24[-.\w]*( AS \w+)?$/);
    for (const pkg of ["nftables", "iptables", "conntrack"])
      assert.match(dockerfile, new RegExp(`\\b${pkg}\\b`));
  });

  it("its entry point runs a file that exists and is copied into the image", () => {
    const entrypoint = JSON.parse(instruction("ENTRYPOINT").slice("ENTRYPOINT ".length)) as string[];
    assert.equal(entrypoint[0], "node");
    // Node's own flags come first.
    const script = entrypoint.slice(1).find((a) => !a.startsWith("--"))!;
    assert.ok(existsSync(join(ROOT, script)), `${script} exists`);
    const copied = dockerfile
      .split("\n")
      .filter((l) => l.startsWith("COPY "))
      .map((l) => l.split(/\s+/)[1]!);
    assert.ok(
      copied.some((src) => script.startsWith(`${src}/`)),
      `${script} is under a COPY source`,
    );
  });
});
