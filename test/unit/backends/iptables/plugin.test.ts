import assert from "node:assert/strict";
import { test } from "node:test";
import { familySettings } from "../../../../src/backend-core/family-settings.ts";
import { cleanupTableText } from "../../../../src/backends/iptables/cleanup.ts";
import { parseIptablesOptions } from "../../../../src/backends/iptables/plugin.ts";
import { serviceRules } from "../../../../src/backends/iptables/render-service.ts";
import { BUILTIN_JUMPS, staticRules } from "../../../../src/backends/iptables/ruleset.ts";
import { countKubeLines, pickVariant } from "../../../../src/backends/iptables/variant.ts";
import { UsageError } from "../../../../src/plugin/usage-error.ts";
import { FakeIptables } from "../../../support/fake-iptables.ts";
import { ep, port, service } from "./fixtures.ts";

const nodePortService = service({
  name: "np",
  type: "NodePort",
  ports: [
    port({
      nodePort: 30080,
      internalEndpoints: [ep("10.1.0.1")],
      externalEndpoints: [ep("10.1.0.1")],
    }),
  ],
});

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
  assert.ok(
    v4?.filter.includes(
      "-A KPNG-FIREWALL -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate DNAT -j DROP",
    ),
  );
  assert.ok(v6?.nat.includes("-A KPNG-SERVICES -d ::1/128 -j RETURN"), "IPv6: never, as kube-proxy");
  const [off] = rules(false);
  assert.ok(off?.nat.includes("-A KPNG-SERVICES -d 127.0.0.0/8 -j RETURN"));
  assert.ok(!off?.filter.some((l) => l.includes("DROP") && l.includes("127.0.0.0/8")));
});

test("localhost NodePorts have a rule of their own, ahead of the node port's (its counter is the metric's)", () => {
  const [v4, v6] = familySettings(
    parseIptablesOptions({ nodeportAddresses: "0.0.0.0/0,::/0", localhostNodeports: true }),
    [],
  ).map((cfg) => serviceRules(nodePortService, cfg).natNodePorts);
  assert.equal(v4?.length, 2);
  assert.match(
    v4?.[0] ?? "",
    /^-A KPNG-NODEPORTS -d 127\.0\.0\.0\/8 -p tcp -m tcp --dport 30080 .* -j KPNG-EXT-/,
  );
  assert.equal(v4?.[0]?.replace(" -d 127.0.0.0/8", ""), v4?.[1], "the same jump, for 127/8 only");
  assert.equal(v6?.length ?? 0, 0, "this Service has no IPv6 address");
});

test("forwarded packets conntrack finds INVALID are dropped, unless nf_conntrack_tcp_be_liberal (as kube-proxy)", () => {
  const [v4] = familySettings(parseIptablesOptions({ nodeportAddresses: "0.0.0.0/0,::/0" }), []);
  assert.ok(v4);
  assert.deepEqual(
    staticRules(v4, []).filter.filter((l) => l.startsWith("-A KPNG-FORWARD")),
    ["-A KPNG-FORWARD -m conntrack --ctstate INVALID -j DROP"],
  );
  assert.deepEqual(
    staticRules({ ...v4, dropInvalid: false }, []).filter.filter((l) => l.startsWith("-A KPNG-FORWARD")),
    [],
  );
  assert.equal(
    BUILTIN_JUMPS.filter.FORWARD?.[0],
    "-j KPNG-FORWARD",
    "every forwarded packet, not only NEW ones",
  );
});
