import assert from "node:assert/strict";
import { test } from "node:test";
import { FakeIptables } from "../../support/fake-iptables.ts";

test("fake iptables-restore: a COMMIT applies completely or not at all", async () => {
  const ipt = new FakeIptables();
  await assert.rejects(
    ipt.restore("IPv4", "*nat\n:A - [0:0]\n-A A -j MISSING\nCOMMIT\n"),
    /missing chain MISSING/,
  );
  assert.equal(ipt.rules("IPv4", "nat", "A"), undefined);
  await ipt.restore("IPv4", "*nat\n:A - [0:0]\n:B - [0:0]\n-A A -j B\n-A B -j RETURN\nCOMMIT\n");
  assert.deepEqual(ipt.rules("IPv4", "nat", "A"), ["-j B"]);
});

test("fake iptables-restore: -X of a referenced chain and -D of a missing rule fail; declaring flushes", async () => {
  const ipt = new FakeIptables();
  await ipt.restore("IPv4", "*nat\n:A - [0:0]\n:B - [0:0]\n-A A -j B\nCOMMIT\n");
  await assert.rejects(ipt.restore("IPv4", "*nat\n:B - [0:0]\n-X B\nCOMMIT\n"), /still referenced/);
  await assert.rejects(ipt.restore("IPv4", "*nat\n-D PREROUTING -j A\nCOMMIT\n"), /no such rule/);
  await ipt.restore("IPv4", "*nat\n:A - [0:0]\n:B - [0:0]\n-X B\nCOMMIT\n");
  assert.deepEqual(ipt.chains("IPv4", "nat").sort(), ["A", "INPUT", "OUTPUT", "POSTROUTING", "PREROUTING"]);
  assert.deepEqual(ipt.rules("IPv4", "nat", "A"), []);
});

test("fake iptables-restore: --test changes nothing", async () => {
  const ipt = new FakeIptables();
  await ipt.restore("IPv6", "*filter\n:A - [0:0]\nCOMMIT\n", { test: true });
  assert.equal(ipt.rules("IPv6", "filter", "A"), undefined);
});
