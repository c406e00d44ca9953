import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MAX_LINE_BYTES, type NftOp, renderOp, renderScript } from "../../../../src/backends/nft/ops.ts";

describe("renderOp: each operation as one nft statement", () => {
  const rows: { op: NftOp; want: string }[] = [
    { op: { verb: "add", kind: "table" }, want: "add table ip kpng" },
    { op: { verb: "delete", kind: "table" }, want: "delete table ip kpng" },
    { op: { verb: "add", kind: "chain", name: "svc-x" }, want: "add chain ip kpng svc-x" },
    {
      op: {
        verb: "add",
        kind: "chain",
        name: "nat-output",
        hook: { type: "nat", hook: "output", priority: -100 },
      },
      want: "add chain ip kpng nat-output { type nat hook output priority -100; policy accept; }",
    },
    { op: { verb: "flush", kind: "chain", name: "svc-x" }, want: "flush chain ip kpng svc-x" },
    { op: { verb: "delete", kind: "chain", name: "svc-x" }, want: "delete chain ip kpng svc-x" },
    {
      op: {
        verb: "add",
        kind: "map",
        name: "m",
        declaration: { key: { types: ["ipv4_addr"] }, value: "verdict" },
      },
      want: "add map ip kpng m { type ipv4_addr : verdict; }",
    },
    {
      op: {
        verb: "add",
        kind: "set",
        name: "aff-1",
        declaration: { key: { types: ["ipv6_addr"] }, flags: ["dynamic", "timeout"], timeoutSeconds: 30 },
      },
      want: "add set ip kpng aff-1 { type ipv6_addr; flags dynamic,timeout; timeout 30s; }",
    },
    {
      op: {
        verb: "add",
        kind: "map",
        name: "endpoints-tcp",
        declaration: {
          key: { typeOf: "ip daddr . th dport . numgen random mod 1" },
          value: "ip daddr . tcp dport",
        },
      },
      want: "add map ip kpng endpoints-tcp { typeof ip daddr . th dport . numgen random mod 1 : ip daddr . tcp dport; }",
    },
    { op: { verb: "delete", kind: "set", name: "aff-1" }, want: "delete set ip kpng aff-1" },
    {
      op: { verb: "add", kind: "rule", chain: "c", rule: "meta l4proto tcp dnat to 10.0.0.1:80" },
      want: "add rule ip kpng c meta l4proto tcp dnat to 10.0.0.1:80",
    },
    {
      op: { verb: "add", kind: "element", set: "m", elements: ["1.2.3.4 : drop", "1.2.3.5 : goto x"] },
      want: "add element ip kpng m { 1.2.3.4 : drop, 1.2.3.5 : goto x }",
    },
  ];
  for (const r of rows) test(r.want, () => assert.equal(renderOp(r.op, "ip", "kpng"), r.want));

  test("a script is the statements one per line, and the same joined on one line", () => {
    const ops: NftOp[] = [
      { verb: "flush", kind: "chain", name: "a" },
      { verb: "add", kind: "rule", chain: "a", rule: "drop" },
    ];
    assert.deepEqual(renderScript(ops, "ip6", "t"), {
      text: "flush chain ip6 t a\nadd rule ip6 t a drop\n",
      line: "flush chain ip6 t a; add rule ip6 t a drop",
    });
    assert.deepEqual(renderScript([], "ip", "t"), { text: "", line: "" });
  });

  test("a script longer than one line nft -i takes has no one-line form: nft -f reads it", () => {
    const elements = Array.from({ length: 20_000 }, (_, i) => `10.${i >> 8}.${i & 255}.1 . tcp . 80`);
    const script = renderScript([{ verb: "add", kind: "element", set: "m", elements }], "ip", "t");
    assert.ok(script.text.length > MAX_LINE_BYTES);
    assert.equal(script.line, undefined);
    assert.ok(script.text.startsWith("add element ip t m { 10.0.0.1 . tcp . 80, 10.0.1.1 . tcp . 80"));
  });
});
