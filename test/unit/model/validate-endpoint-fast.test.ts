// The endpoint reader's fast path (plainEndpoint) must read every endpoint it accepts exactly as
// the field-by-field reader does, and leave everything else (odd or invalid) to it.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { InvalidField } from "../../../src/model/field-reader.ts";
import { plainEndpoint, readEndpoint } from "../../../src/model/validate-endpointslice.ts";

const VALUES: Record<string, readonly unknown[]> = {
  addresses: [
    undefined,
    null,
    [],
    ["10.0.0.1"],
    ["10.0.0.1", "10.0.0.2"],
    ["01.0.0.1"],
    [""],
    [7],
    "10.0.0.1",
    ["2001:db8::1"],
  ],
  conditions: [
    undefined,
    null,
    {},
    { ready: true, serving: true, terminating: false },
    { ready: null },
    { ready: "yes" },
    [],
    { terminating: true, serving: false },
  ],
  hints: [
    undefined,
    null,
    {},
    { forZones: [{ name: "z1" }] },
    { forNodes: [{ name: "n1" }, { name: "n2" }] },
    { forZones: [{ name: "" }] },
    { forZones: [{}] },
    { forZones: "z1" },
    { forZones: [null] },
    "hint",
  ],
  targetRef: [
    undefined,
    null,
    { kind: "Pod", name: "p-1" },
    { kind: "Node", name: "n" },
    { kind: 3 },
    { kind: "Pod" },
    "pod",
  ],
  nodeName: [undefined, null, "", "n1", 5],
  hostname: [undefined, "h", false],
  zone: [undefined, null, "z1", {}],
};

function read(raw: unknown): unknown {
  try {
    return readEndpoint(raw, "endpoints[0]", "IPv4");
  } catch (err) {
    if (err instanceof InvalidField) return "invalid";
    throw err;
  }
}

describe("plainEndpoint: the endpoint reader's fast path", () => {
  test("every endpoint it reads, it reads as readEndpoint does; it reads the usual ones", () => {
    let seed = 11;
    const next = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    let fast = 0;
    for (let i = 0; i < 5000; i++) {
      const raw: Record<string, unknown> = {};
      for (const [field, values] of Object.entries(VALUES)) {
        const v = values[next(values.length)];
        if (v !== undefined) raw[field] = v;
      }
      const got = plainEndpoint(raw, "IPv4");
      if (got === undefined) continue;
      fast++;
      assert.deepEqual(got, read(raw), JSON.stringify(raw));
    }
    assert.ok(fast > 100, `only ${fast} endpoints took the fast path`);
  });

  test("the endpoint of an IPv6 or FQDN slice, and a non-object, are left to the reader", () => {
    assert.equal(plainEndpoint({ addresses: ["10.0.0.1"] }, "IPv6"), undefined);
    assert.equal(plainEndpoint({ addresses: ["a.example"] }, "FQDN"), undefined);
    assert.equal(plainEndpoint(["10.0.0.1"], "IPv4"), undefined);
    assert.equal(plainEndpoint(null, "IPv4"), undefined);
  });
});
