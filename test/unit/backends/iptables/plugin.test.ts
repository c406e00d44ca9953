import assert from "node:assert/strict";
import { test } from "node:test";
import { familySettings } from "../../../../src/backend-core/family-settings.ts";
import { cleanupTableText } from "../../../../src/backends/iptables/cleanup.ts";
import { parseIptablesOptions } from "../../../../src/backends/iptables/plugin.ts";
import { staticRules } from "../../../../src/backends/iptables/ruleset.ts";
import { countKubeLines, pickVariant } from "../../../../src/backends/iptables/variant.ts";
import { UsageError } from "../../../../src/plugin/usage-error.ts";
import { FakeIptables } from "../../../support/fake-iptables.ts";

test("options: defaults, durations and the mode", () => {
  const o = parseIptablesOptions({ syncPeriod: "10s", iptablesMode: "legacy" });
  assert.equal(o.syncPeriodMs, 10_000);
  assert.equal(o.canaryIntervalMs, 2000);
  assert.equal(o.mode, "legacy");
  assert.equal(parseIptablesOptions({}).mode, "auto");
});

test("options: a bad flag is a UsageError naming it", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ iptablesMode: "ipvs" }, /--iptables-mode/],
    [{ nodeportAddresses: "10.0.0.0/99" }, /--nodeport-addresses/],
    [{ clusterCidr: "nope" }, /--cluster-cidr/],
    [{ syncPeriod: "soon" }, /--sync-period/],
    [{ syncPeriod: "0" }, /--sync-period: "0" is too short/],
    [{ healthzBindAddress: "nowhere" }, /--healthz-bind-address/],
    [{ canaryInterval: "x" }, /--canary-interval/],
  ];
  for (const [raw, flag] of cases)
    assert.throws(
      () => parseIptablesOptions(raw),
      (e) => e instanceof UsageError && flag.test(e.message),
    );
});

test("family configs split node-port and pod CIDRs by family; primary means the node's IPs", () => {
  const [v4, v6] = familySettings(
    { nodePortAddresses: "primary", clusterCIDRs: "10.244.0.0/16,2001:db8:1::/64", masqueradeAll: false },
    ["192.0.2.1", "2001:db8::1"],
  );
  assert.deepEqual(v4?.nodePortCIDRs, ["192.0.2.1/32"]);
  assert.deepEqual(v6?.podCIDRs, ["2001:db8:1::/64"]);
});

test("variant: legacy only when it holds more Kubernetes rules than nft", () => {
  assert.equal(pickVariant({ nft: 0, legacy: 0 }), "nft");
  assert.equal(pickVariant({ nft: 3, legacy: 10 }), "legacy");
  assert.equal(pickVariant({ nft: 10, legacy: 10 }), "nft");
  assert.equal(
    countKubeLines(":KUBE-SERVICES - [0:0]\n:FOO - [0:0]\n-A KPNG-SVC-X -j DNAT\n-A INPUT -j KUBE-X\n"),
    2,
  );
});

test("cleanup removes kpng's chains and jumps only", async () => {
  const ipt = new FakeIptables();
  ipt.edit("IPv4", "nat", (c) => {
    c.set("KPNG-SERVICES", ["-j KPNG-SVC-A"]);
    c.set("KPNG-SVC-A", ["-j RETURN"]);
    c.set("OTHER", []);
    c.get("PREROUTING")?.push("-j OTHER", "-j KPNG-SERVICES");
  });
  await ipt.restore("IPv4", cleanupTableText("nat", await ipt.save("IPv4", "nat")));
  assert.deepEqual(ipt.chains("IPv4", "nat").sort(), [
    "INPUT",
    "OTHER",
    "OUTPUT",
    "POSTROUTING",
    "PREROUTING",
  ]);
  assert.deepEqual(ipt.rules("IPv4", "nat", "PREROUTING"), ["-j OTHER"]);
  assert.equal(cleanupTableText("filter", await ipt.save("IPv4", "filter")), "");
});

test("--masquerade-bit sets the mark of KPNG-MARK-MASQ and KPNG-POSTROUTING (kube-proxy's masqueradeBit)", () => {
  const marks = (bit: string) => {
    const [v4] = familySettings(parseIptablesOptions({ masqueradeBit: bit }), []);
    assert.ok(v4);
    return staticRules(v4, []).nat.filter((l) => /mark/.test(l));
  };
  assert.ok(
    marks("14").every((l) => l.includes("0x4000")),
    marks("14").join("\n"),
  );
  const bit3 = marks("3");
  assert.ok(
    bit3.length === 3 && bit3.every((l) => l.includes("0x8") && !l.includes("0x4000")),
    bit3.join("\n"),
  );
  assert.throws(() => parseIptablesOptions({ masqueradeBit: "40" }), /--masquerade-bit: "40" is not a bit/);
});

test("--localhost-nodeports: IPv4 NodePorts on 127.0.0.1 too, martian packets to 127/8 dropped; IPv6 never", () => {
  const rules = (localhost: boolean) =>
    familySettings(
      parseIptablesOptions({ nodeportAddresses: "0.0.0.0/0,::/0", localhostNodeports: localhost }),
      [],
    ).map((cfg) => staticRules(cfg, []));
  const [v4, v6] = rules(true);
  assert.ok(!v4?.nat.some((l) => l.includes("-d 127.0.0.0/8 -j RETURN")), v4?.nat.join("\n"));
  assert.ok(v4?.nat.includes("-A KPNG-SERVICES -d 0.0.0.0/0 -m addrtype --dst-type LOCAL -j KPNG-NODEPORTS"));
  assert.equal(
    v4?.filter[0],
    "-A KPNG-FIREWALL -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate DNAT -j DROP",
  );
  assert.ok(v6?.nat.includes("-A KPNG-SERVICES -d ::1/128 -j RETURN"), "IPv6: never, as kube-proxy");
  const [off] = rules(false);
  assert.ok(off?.nat.includes("-A KPNG-SERVICES -d 127.0.0.0/8 -j RETURN"));
  assert.ok(!off?.filter.some((l) => l.includes("DROP") && l.includes("127.0.0.0/8")));
});
