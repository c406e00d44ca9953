import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseKubeObject, parseServiceCIDR } from "../../../src/model/validate.ts";

// biome-ignore lint/suspicious/noExplicitAny: fixtures are untyped JSON on purpose
type Raw = Record<string, any>;

function raw(edit: (r: Raw) => void = () => {}): Raw {
  const r: Raw = {
    apiVersion: "networking.k8s.io/v1",
    kind: "ServiceCIDR",
    metadata: { name: "kubernetes" },
    spec: { cidrs: ["198.51.100.0/24", "2001:db8:1::/112"] },
  };
  edit(r);
  return r;
}

describe("ServiceCIDR validation", () => {
  const good: { name: string; edit: (r: Raw) => void; cidrs: string[] }[] = [
    { name: "one range per family", edit: () => {}, cidrs: ["198.51.100.0/24", "2001:db8:1::/112"] },
    {
      name: "one family only",
      edit: (r) => (r.spec.cidrs = ["2001:db8:1::/112"]),
      cidrs: ["2001:db8:1::/112"],
    },
    {
      name: "v1beta1",
      edit: (r) => (r.apiVersion = "networking.k8s.io/v1beta1"),
      cidrs: ["198.51.100.0/24", "2001:db8:1::/112"],
    },
    {
      name: "a list item without kind or apiVersion",
      edit: (r) => {
        delete r.kind;
        delete r.apiVersion;
      },
      cidrs: ["198.51.100.0/24", "2001:db8:1::/112"],
    },
    { name: "a host range", edit: (r) => (r.spec.cidrs = ["198.51.100.7/32"]), cidrs: ["198.51.100.7/32"] },
  ];
  for (const row of good) {
    test(`accepts ${row.name}`, () => {
      const parsed = parseServiceCIDR(raw(row.edit));
      assert.ok(parsed.ok, parsed.ok ? "" : parsed.reason);
      assert.deepEqual(parsed.value.cidrs, row.cidrs);
      assert.equal(parsed.value.metadata.name, "kubernetes");
      assert.equal(parsed.value.metadata.namespace, "");
    });
  }

  const bad: { name: string; edit: (r: Raw) => void; reason: RegExp }[] = [
    { name: "no cidrs", edit: (r) => (r.spec.cidrs = []), reason: /spec\.cidrs: expected one or two CIDRs/ },
    { name: "no spec", edit: (r) => delete r.spec, reason: /spec\.cidrs: expected one or two CIDRs/ },
    { name: "three cidrs", edit: (r) => r.spec.cidrs.push("203.0.113.0/24"), reason: /got 3/ },
    {
      name: "not a CIDR",
      edit: (r) => (r.spec.cidrs = ["198.51.100.0"]),
      reason: /spec\.cidrs\[0\]: "198\.51\.100\.0" is not a CIDR/,
    },
    { name: "a bad prefix", edit: (r) => (r.spec.cidrs = ["198.51.100.0/33"]), reason: /is not a CIDR/ },
    {
      name: "the whole IPv4 space (a default route)",
      edit: (r) => (r.spec.cidrs = ["0.0.0.0/0"]),
      reason: /0\.0\.0\.0\/0 covers every IPv4 address \(a default route\)/,
    },
    {
      name: "the whole IPv6 space next to a good IPv4 range",
      edit: (r) => (r.spec.cidrs = ["198.51.100.0/24", "::/0"]),
      reason: /spec\.cidrs\[1\]: ::\/0 covers every IPv6 address/,
    },
    {
      name: "host bits set",
      edit: (r) => (r.spec.cidrs = ["198.51.100.1/24"]),
      reason: /host bits set \(the network is 198\.51\.100\.0\/24\)/,
    },
    {
      name: "two of one family",
      edit: (r) => (r.spec.cidrs = ["198.51.100.0/24", "203.0.113.0/24"]),
      reason: /spec\.cidrs\[1\]: a second IPv4 CIDR/,
    },
    { name: "a number", edit: (r) => (r.spec.cidrs = [24]), reason: /spec\.cidrs\[0\]/ },
    {
      name: "a list that is not",
      edit: (r) => (r.spec.cidrs = "198.51.100.0/24"),
      reason: /spec\.cidrs: expected a list/,
    },
    { name: "no name", edit: (r) => delete r.metadata.name, reason: /metadata\.name/ },
    {
      name: "another apiVersion",
      edit: (r) => (r.apiVersion = "v1"),
      reason: /apiVersion: "v1" is not supported for ServiceCIDR/,
    },
  ];
  for (const row of bad) {
    test(`rejects ${row.name}, naming the object`, () => {
      const parsed = parseServiceCIDR(raw(row.edit));
      assert.equal(parsed.ok, false);
      if (parsed.ok) return;
      assert.equal(parsed.kind, "ServiceCIDR");
      assert.equal(parsed.name, row.name === "no name" ? "<unnamed>" : "kubernetes");
      assert.match(parsed.reason, row.reason);
    });
  }

  test("parseKubeObject dispatches kind: ServiceCIDR", () => {
    const parsed = parseKubeObject(raw());
    assert.ok(parsed.ok);
    assert.equal(parsed.value.kind, "ServiceCIDR");
  });
});
