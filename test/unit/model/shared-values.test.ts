// Parts that many validated objects hold alike are kept once (src/model/shared-values.ts): the
// same ports, no annotations, no external IPs. Sharing must never join two values that differ.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { EndpointSlice, Service } from "../../../src/model/kube.ts";
import { SharedLists, SharedStrings } from "../../../src/model/shared-values.ts";
import { parseEndpointSlice, parseService } from "../../../src/model/validate.ts";

function service(name: string, ports: unknown[], more: Record<string, unknown> = {}): Service {
  const r = parseService({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: "ns" },
    spec: { clusterIP: "10.0.0.1", clusterIPs: ["10.0.0.1"], ipFamilies: ["IPv4"], ports, ...more },
  });
  assert.ok(r.ok, r.ok ? "" : r.reason);
  return r.value;
}

function slice(name: string, ports: unknown[]): EndpointSlice {
  const r = parseEndpointSlice({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name, namespace: "ns", labels: { "kubernetes.io/service-name": name } },
    addressType: "IPv4",
    ports,
    endpoints: [{ addresses: ["192.0.2.1"] }],
  });
  assert.ok(r.ok, r.ok ? "" : r.reason);
  return r.value;
}

const http = { name: "http", protocol: "TCP", port: 80, targetPort: 8080 };

/** The test items alike: the same string, or objects with the same fields. */
const sameItem = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** A key that describes a list of test items exactly. */
const keyOf = (list: readonly unknown[]) => JSON.stringify(list);

describe("values validated objects hold alike", () => {
  test("Services with the same ports share one frozen list; any field that differs makes its own", () => {
    const a = service("a", [http]);
    const b = service("b", [{ ...http }]);
    assert.equal(a.ports, b.ports);
    assert.ok(Object.isFrozen(a.ports) && Object.isFrozen(a.ports[0]));
    const rows: [string, unknown[]][] = [
      ["another target port", [{ ...http, targetPort: 8081 }]],
      ["a named target port", [{ ...http, targetPort: "8080" }]],
      ["another protocol", [{ ...http, protocol: "UDP" }]],
      ["another name", [{ ...http, name: "web" }]],
      ["another port", [{ ...http, port: 81 }]],
      ["one port more", [http, { ...http, name: "dns", protocol: "UDP", port: 53 }]],
    ];
    for (const [what, ports] of rows) {
      const other = service(`x-${what.replaceAll(" ", "-")}`, ports);
      assert.notEqual(other.ports, a.ports, what);
      assert.deepEqual(
        other.ports.map((p) => [p.name, p.protocol, p.port, p.targetPort]),
        ports.map((p) => {
          const q = p as typeof http;
          return [q.name, q.protocol, q.port, q.targetPort];
        }),
        what,
      );
    }
  });

  test("a name that reads like more ports stays apart from those ports", () => {
    // Fields written one after the other would read alike here; the name's length tells them apart.
    const one = service("one", [{ name: "a/TCP/80/#8080;b", protocol: "TCP", port: 81, targetPort: 8080 }]);
    const two = service("two", [
      { name: "a", protocol: "TCP", port: 80, targetPort: 8080 },
      { name: "b", protocol: "TCP", port: 81, targetPort: 8080 },
    ]);
    assert.notEqual(one.ports, two.ports);
    assert.equal(one.ports.length, 1);
    assert.equal(two.ports.length, 2);
    const s1 = slice("s1", [{ name: "", protocol: "TCP", port: 80 }]);
    const s2 = slice("s2", [{ protocol: "TCP", port: 80 }]);
    assert.notEqual(s1.ports, s2.ports);
    assert.equal(s1.ports[0]?.name, "");
    assert.equal(s2.ports[0]?.name, null);
  });

  test("a NodePort Service keeps ports of its own", () => {
    const a = service("np-a", [{ ...http, nodePort: 30080 }], { type: "NodePort" });
    const b = service("np-b", [{ ...http, nodePort: 30080 }], { type: "NodePort" });
    assert.notEqual(a.ports, b.ports);
    assert.equal(a.ports[0]?.nodePort, 30080);
  });

  test("slices with the same ports share one frozen list", () => {
    const ports = [
      { name: "http", protocol: "TCP", port: 8080 },
      { name: "dns", protocol: "UDP", port: 8053 },
    ];
    const a = slice("a", ports);
    const b = slice("b", structuredClone(ports));
    assert.equal(a.ports, b.ports);
    assert.ok(Object.isFrozen(a.ports) && Object.isFrozen(a.ports[1]));
    assert.notEqual(slice("c", [ports[0]]).ports, a.ports);
  });

  test("no annotations, no external IPs: one shared empty value; anything else is the object's own", () => {
    const a = service("a", [http]);
    const b = service("b", [http], { externalIPs: ["192.0.2.9"] });
    assert.equal(a.metadata.annotations, b.metadata.annotations);
    assert.deepEqual(a.metadata.annotations, {});
    assert.ok(Object.isFrozen(a.externalIPs));
    assert.deepEqual(b.externalIPs, ["192.0.2.9"]);
    assert.equal(a.ipFamilies, b.ipFamilies);
    assert.notEqual(a.clusterIPs, b.clusterIPs);
  });

  test("the table is bounded: past its size lists are used as they are, unshared", () => {
    const table = new SharedLists<{ n: number }>(2, (a, b) => a.n === b.n);
    const first = table.shared([{ n: 1 }], keyOf);
    assert.equal(table.shared([{ n: 1 }], keyOf), first);
    table.shared([{ n: 2 }], keyOf);
    const third = [{ n: 3 }];
    assert.equal(table.shared(third, keyOf), third);
    assert.notEqual(table.shared([{ n: 3 }], keyOf), third);
    assert.equal(table.size, 2);
    assert.ok(!Object.isFrozen(third));
  });

  test("a list the same as the last one given out is that one; any difference is looked up by key", () => {
    const table = new SharedLists<{ n: number; s?: string } | string>(8, sameItem);
    const one = table.shared([{ n: 1 }, "a"], keyOf);
    const two = table.shared([{ n: 2 }, "a"], keyOf);
    assert.equal(table.shared([{ n: 1 }, "a"], keyOf), one, "by key");
    assert.equal(table.shared([{ n: 1 }, "a"], keyOf), one, "the last one");
    const rows: [string, ({ n: number; s?: string } | string)[]][] = [
      ["a field more", [{ n: 1, s: "x" }, "a"]],
      ["another string", [{ n: 1 }, "b"]],
      ["an item more", [{ n: 1 }, "a", "a"]],
      ["an item less", [{ n: 1 }]],
      ["a string for an object", ["1", "a"]],
    ];
    for (const [what, list] of rows) {
      table.shared([{ n: 1 }, "a"], keyOf);
      const got = table.shared(list, keyOf);
      assert.notEqual(got, one, what);
      assert.deepEqual(got, list, what);
    }
    assert.equal(table.shared([{ n: 2 }, "a"], keyOf), two);
  });

  test("the string table is bounded too: past its size texts are used as they are", () => {
    const table = new SharedStrings(2);
    assert.equal(table.shared("node-a"), "node-a");
    table.shared("node-b");
    table.shared("node-c");
    table.shared("node-a");
    assert.equal(table.size, 2);
  });

  test("endpoints on one node hold one copy of its name, however long, not one each", () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    // JSON.parse, as the sources read objects, makes a string per occurrence of a long text.
    const slices = (nodeName: string) =>
      (
        JSON.parse(
          JSON.stringify(
            Array.from({ length: 200 }, (_, i) => ({
              apiVersion: "discovery.k8s.io/v1",
              kind: "EndpointSlice",
              metadata: { name: `s${i}`, namespace: "ns", labels: { "kubernetes.io/service-name": `s${i}` } },
              addressType: "IPv4",
              ports: [{ name: "http", protocol: "TCP", port: 8080 }],
              endpoints: Array.from({ length: 100 }, (_, e) => ({
                addresses: [`10.${i >> 8}.${i & 255}.${e}`],
                nodeName,
                zone: `${nodeName}-zone`,
              })),
            })),
          ),
        ) as unknown[]
      ).map((raw) => {
        const r = parseEndpointSlice(raw);
        assert.ok(r.ok, r.ok ? "" : r.reason);
        return r.value;
      });
    const heldBy = (nodeName: string) => {
      gc();
      const before = process.memoryUsage().heapUsed;
      const held = slices(nodeName);
      gc();
      const bytes = process.memoryUsage().heapUsed - before;
      assert.equal(held[199]?.endpoints[99]?.nodeName, nodeName);
      return bytes;
    };
    heldBy("warm-up");
    const short = heldBy("n1");
    // 20,000 endpoints: a copy each of a 1,000-character name and zone would be 40 MB.
    const long = heldBy(`ip-10-0-1-23.eu-west-1.compute.internal-${"x".repeat(1000)}`);
    assert.ok(
      long - short < 4 * 2 ** 20,
      `long names held ${((long - short) / 2 ** 20).toFixed(1)} MiB more`,
    );
  });
});
