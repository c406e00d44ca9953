// deploy/fallback-controller.yaml must hang together: 2 replicas under one ServiceAccount, RBAC
// that covers every request the controller makes and nothing more, args the CLI accepts.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import type { Invocation } from "../../../src/cli/invocation.ts";
import { controllers, globalSinks, localSinks, localSources, sources } from "../../../src/cli/plugins.ts";
import { buildProgram } from "../../../src/cli/program.ts";

// biome-ignore lint/suspicious/noExplicitAny: manifests are free-form YAML, checked field by field below.
type Manifest = any;

const docs: Manifest[] = parseAllDocuments(
  readFileSync(join(import.meta.dirname, "..", "..", "..", "deploy", "fallback-controller.yaml"), "utf8"),
).map((d) => d.toJS());
const of = (kind: string): Manifest[] => docs.filter((d) => d.kind === kind);
const deployment = of("Deployment")[0];
const container = deployment.spec.template.spec.containers[0];

function granted(kind: "ClusterRole" | "Role", group: string, resource: string, verb: string): boolean {
  return of(kind).some((role) =>
    role.rules.some(
      (r: Manifest) =>
        r.apiGroups.includes(group) && r.resources.includes(resource) && r.verbs.includes(verb),
    ),
  );
}

/** Every request the controller and its leader election make. */
const NEEDED: [kind: "ClusterRole" | "Role", group: string, resource: string, verbs: string[]][] = [
  ["ClusterRole", "", "services", ["list", "watch"]],
  ["ClusterRole", "", "pods", ["list", "watch"]],
  ["ClusterRole", "", "nodes", ["list", "watch"]],
  ["ClusterRole", "discovery.k8s.io", "endpointslices", ["list", "watch", "create", "update", "delete"]],
  ["ClusterRole", "", "events", ["create"]],
  // Owner references with blockOwnerDeletion (OwnerReferencesPermissionEnforcement).
  ["ClusterRole", "", "services/finalizers", ["update"]],
  ["Role", "coordination.k8s.io", "leases", ["get", "create", "update"]],
];

describe("deploy/fallback-controller.yaml", () => {
  it("runs 2 replicas whose selector matches the template", () => {
    assert.equal(deployment.spec.replicas, 2);
    const labels = deployment.spec.template.metadata.labels;
    for (const [k, v] of Object.entries(deployment.spec.selector.matchLabels)) assert.equal(labels[k], v);
  });

  it("RBAC grants every request the controller makes", () => {
    for (const [kind, group, resource, verbs] of NEEDED) {
      for (const verb of verbs)
        assert.ok(granted(kind, group, resource, verb), `${kind}: ${verb} ${group || "core"}/${resource}`);
    }
  });

  it("RBAC grants nothing else: no wildcard, no write beyond slices, events and its Lease", () => {
    const rules = [...of("ClusterRole"), ...of("Role")].flatMap((r) => r.rules);
    for (const rule of rules) {
      for (const field of ["apiGroups", "resources", "verbs"])
        assert.ok(!rule[field].includes("*"), JSON.stringify(rule));
      const wanted = NEEDED.filter(([, g, r]) => rule.apiGroups.includes(g) && rule.resources.includes(r));
      assert.ok(wanted.length > 0, `unneeded rule ${JSON.stringify(rule)}`);
      for (const verb of rule.verbs)
        assert.ok(
          wanted.some(([, , , verbs]) => verbs.includes(verb)),
          `unneeded ${verb}`,
        );
    }
  });

  it("the Lease role names the Lease the args name", () => {
    const args: string[] = container.args;
    const at = args.indexOf("--leader-elect-lease-name");
    const leaseName = at === -1 ? "kpng-fallback-controller" : args[at + 1];
    const leaseUpdate = of("Role")[0].rules.find((r: Manifest) => r.verbs.includes("update"));
    assert.deepEqual(leaseUpdate.resourceNames, [leaseName]);
  });

  it("the heap is capped well below the memory limit (the rest is Node, code and buffers)", () => {
    const options: string = container.env.find((e: Manifest) => e.name === "NODE_OPTIONS").value;
    const heapMiB = Number(/--max-old-space-size=(\d+)/.exec(options)?.[1]);
    const limitMiB = Number(/^(\d+)Mi$/.exec(container.resources.limits.memory)?.[1]);
    assert.ok(heapMiB > 0 && limitMiB - heapMiB >= 128, `heap ${heapMiB} MiB, limit ${limitMiB} MiB`);
  });

  it("a startup probe gives the first list minutes before liveness may kill the controller", () => {
    const startup = container.startupProbe;
    assert.equal(startup.httpGet.path, "/healthz");
    assert.ok(startup.periodSeconds * startup.failureThreshold >= 300, "at least 5 minutes to list");
    assert.equal(container.livenessProbe.initialDelaySeconds, undefined);
  });

  it("the bindings name the ServiceAccount the pods run as", () => {
    const account = of("ServiceAccount")[0].metadata;
    assert.equal(deployment.spec.template.spec.serviceAccountName, account.name);
    for (const binding of [...of("ClusterRoleBinding"), ...of("RoleBinding")]) {
      assert.deepEqual(binding.subjects, [
        { kind: "ServiceAccount", name: account.name, namespace: account.namespace },
      ]);
    }
  });

  it("the container args parse with the real CLI into the fallback controller", async () => {
    const invocations: Invocation[] = [];
    const program = buildProgram(
      { sources, localSinks, globalSinks, localSources, controllers },
      async (invocation) => {
        invocations.push(invocation);
      },
      {
        configure: (root) => root.exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} }),
      },
    );
    await program.parseAsync(container.args, { from: "user" });
    assert.equal(invocations[0]?.form, "controller");
    const probe = container.livenessProbe.httpGet;
    assert.equal(probe.path, "/healthz");
    assert.equal(container.ports.find((p: Manifest) => p.name === probe.port)?.containerPort, 10260);
  });
});
