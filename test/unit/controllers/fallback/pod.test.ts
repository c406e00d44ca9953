import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parsePod } from "../../../../src/controllers/fallback/pod.ts";

function raw(extra: { metadata?: object; spec?: object; status?: object } = {}): unknown {
  return {
    metadata: { name: "a", namespace: "ns", uid: "u1", labels: { app: "sorry" }, ...extra.metadata },
    spec: {
      nodeName: "n1",
      containers: [{ name: "c", ports: [{ name: "http", containerPort: 8080 }] }],
      ...extra.spec,
    },
    status: {
      phase: "Running",
      podIPs: [{ ip: "203.0.113.1" }, { ip: "2001:db8::1" }],
      conditions: [{ type: "Ready", status: "True" }],
      ...extra.status,
    },
  };
}

describe("pod parsing", () => {
  test("a running ready pod", () => {
    const r = parsePod(raw());
    assert.ok(r.ok);
    assert.deepEqual(r.value.ips, ["203.0.113.1", "2001:db8::1"]);
    assert.equal(r.value.ready, true);
    assert.equal(r.value.terminating, false);
    assert.equal(r.value.nodeName, "n1");
    assert.deepEqual(r.value.ports, [{ name: "http", containerPort: 8080, protocol: "TCP" }]);
  });

  test("sidecars (init containers that keep running) add their named ports; plain init containers do not", () => {
    const r = parsePod(
      raw({
        spec: {
          containers: [{ name: "c", ports: [{ name: "http", containerPort: 8080 }] }],
          initContainers: [
            { name: "setup", ports: [{ name: "setup", containerPort: 7000 }] },
            { name: "proxy", restartPolicy: "Always", ports: [{ name: "proxy", containerPort: 15001 }] },
          ],
        },
      }),
    );
    assert.ok(r.ok);
    assert.deepEqual(
      r.value.ports.map((p) => `${p.name}=${p.containerPort}`),
      ["http=8080", "proxy=15001"],
    );
  });

  test("only what slices are built from is kept: no annotations", () => {
    const r = parsePod(raw({ metadata: { annotations: { big: "x".repeat(4096) } } }));
    assert.ok(r.ok);
    assert.deepEqual(r.value.metadata.annotations, {});
  });

  const rows: {
    name: string;
    input: Parameters<typeof raw>[0];
    check: (p: {
      ready: boolean;
      terminating: boolean;
      finished: boolean;
      ips: readonly string[];
    }) => boolean;
  }[] = [
    {
      name: "Ready False: not ready",
      input: { status: { conditions: [{ type: "Ready", status: "False" }] } },
      check: (p) => !p.ready,
    },
    {
      name: "no conditions: not ready",
      input: { status: { conditions: undefined } },
      check: (p) => !p.ready,
    },
    {
      name: "deletionTimestamp: terminating",
      input: { metadata: { deletionTimestamp: "2026-01-01T00:00:00Z" } },
      check: (p) => p.terminating,
    },
    {
      name: "phase Succeeded: finished",
      input: { status: { phase: "Succeeded" } },
      check: (p) => p.finished,
    },
    {
      name: "only status.podIP (old servers)",
      input: { status: { podIPs: undefined, podIP: "203.0.113.9" } },
      check: (p) => p.ips.join() === "203.0.113.9",
    },
    { name: "no IP yet", input: { status: { podIPs: undefined } }, check: (p) => p.ips.length === 0 },
  ];
  for (const row of rows) {
    test(row.name, () => {
      const r = parsePod(raw(row.input));
      assert.ok(r.ok);
      assert.ok(row.check(r.value));
    });
  }

  test("an invalid pod is refused with its name and the field", () => {
    const r = parsePod(raw({ status: { podIPs: [{ ip: "banana" }] } }));
    assert.ok(!r.ok);
    assert.equal(r.name, "ns/a");
    assert.match(r.reason, /status\.podIPs\[0\]\.ip/);
  });
});
