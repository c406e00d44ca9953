// Smaller faults: one IPv6 address written two ways became two endpoints; a YAML stack overflow
// was reported as a syntax error; SIGHUP killed kpng without a word.

import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { setImmediate as nextMacrotask } from "node:timers/promises";
import { LocalStateTracker } from "../../src/brain/local-state-tracker.ts";
import { ClusterStore } from "../../src/brain/store.ts";
import type { ClusterChange } from "../../src/model/global.ts";
import { canonicalAddress } from "../../src/model/ip.ts";
import { parseClusterFile } from "../../src/sources/file/parse.ts";
import { eventually, startKpng } from "./support.ts";

const ROOT = join(import.meta.dirname, "..", "..");

const DUAL_SPELLING = `apiVersion: v1
kind: Service
metadata: { name: web, namespace: default }
spec:
  clusterIP: 2001:DB8::A
  clusterIPs: [2001:DB8::A]
  ipFamilies: [IPv6]
  ports: [{ name: http, port: 80, targetPort: 8080 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: web-1, namespace: default, labels: { kubernetes.io/service-name: web } }
addressType: IPv6
ports: [{ name: http, protocol: TCP, port: 8080 }]
endpoints:
  - addresses: ["2001:DB8:0000::00C"]
    conditions: { ready: true }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: web-2, namespace: default, labels: { kubernetes.io/service-name: web } }
addressType: IPv6
ports: [{ name: http, protocol: TCP, port: 8080 }]
endpoints:
  - addresses: ["2001:db8::c"]
    conditions: { ready: true }
`;

describe("fault: smaller ones", () => {
  test("one pod IPv6 address written two ways is one endpoint, in canonical form", async () => {
    const parsed = parseClusterFile(DUAL_SPELLING, "dual.yaml");
    assert.ok(parsed.ok);
    const store = new ClusterStore();
    for (const o of [...parsed.contents.services, ...parsed.contents.endpointSlices]) store.upsert(o);
    const tracker = new LocalStateTracker(store, "n1");
    store.subscribe((c: ClusterChange) => tracker.update(c));
    store.synced();
    await nextMacrotask();
    const web = tracker.state.services.get("default/web");
    assert.deepEqual(
      web?.families.map((f) => f.clusterIP),
      ["2001:db8::a"],
    );
    assert.deepEqual(
      web?.ports[0]?.internalEndpoints.map((e) => e.ip),
      ["2001:db8::c"],
    );
  });

  test("canonicalAddress: IPv6 per RFC 5952, IPv4 unchanged, non-addresses undefined", () => {
    const cases: [string, string | undefined][] = [
      ["2001:DB8:0000::00C", "2001:db8::c"],
      ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
      ["2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"],
      ["::1", "::1"],
      ["203.0.113.7", "203.0.113.7"],
      ["fe80::1%eth0", undefined],
      ["not-an-ip", undefined],
    ];
    for (const [input, want] of cases) assert.equal(canonicalAddress(input), want, input);
  });

  test("a YAML file nested deeper than the parser's stack says so, not 'syntax error'", () => {
    const parsed = parseClusterFile(`${"[".repeat(20_000)}${"]".repeat(20_000)}`, "deep.yaml");
    assert.equal(parsed.ok, false);
    if (parsed.ok) return;
    assert.match(parsed.error, /^deep\.yaml:1:\d+: YAML nested too deeply/);
    assert.doesNotMatch(parsed.error, /syntax error|Maximum call stack/);
  });

  test("SIGHUP stops kpng cleanly, with a log line, exit 0", { timeout: 20_000 }, async () => {
    const { child, out, exited } = startKpng([
      "file",
      "--input",
      join(ROOT, "examples", "cluster.yaml"),
      "to-json",
    ]);
    await eventually(() => out.stdout.includes("\n}\n"), "the first document", 15_000);
    child.kill("SIGHUP");
    assert.equal(await exited, 0, out.stderr);
    assert.match(out.stderr, /"signal":"SIGHUP".*"msg":"stopping"/);
  });
});
