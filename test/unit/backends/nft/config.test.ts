import assert from "node:assert/strict";
import { test } from "node:test";
import { skeletonOps } from "../../../../src/backends/nft/base.ts";
import { cleanupTransaction, tableConfigs } from "../../../../src/backends/nft/config.ts";
import { primaryAddresses } from "../../../../src/host/host-network.ts";

const settings = { table: "kpng", nodePortAddresses: "primary", clusterCIDRs: "", masqueradeAll: false };

test("primary nodeport addresses are the node's primary IPs, one /32 or /128 each, per family", () => {
  const [v4, v6] = tableConfigs(settings, ["192.0.2.1", "2001:db8::1"]);
  assert.deepEqual(v4?.nodePortCIDRs, ["192.0.2.1/32"]);
  assert.deepEqual(v6?.nodePortCIDRs, ["2001:db8::1/128"]);
});

test("nodeport CIDRs and cluster CIDRs are split per family and normalised", () => {
  const [v4, v6] = tableConfigs(
    {
      ...settings,
      nodePortAddresses: "192.0.2.7/24, 2001:db8::/64",
      clusterCIDRs: "10.244.1.0/16,fd00::/48",
    },
    [],
  );
  assert.deepEqual(v4?.nodePortCIDRs, ["192.0.2.0/24"]);
  assert.deepEqual(v4?.podCIDRs, ["10.244.0.0/16"]);
  assert.deepEqual(v6?.nodePortCIDRs, ["2001:db8::/64"]);
  assert.deepEqual(v6?.podCIDRs, ["fd00::/48"]);
});

test("a bad CIDR or table name is refused with the flag to fix", () => {
  assert.throws(() => tableConfigs({ ...settings, clusterCIDRs: "10.0.0.0/99" }, []), /--cluster-cidr/);
  assert.throws(() => tableConfigs({ ...settings, nodePortAddresses: "bogus" }, []), /--nodeport-addresses/);
  assert.throws(() => tableConfigs({ ...settings, table: "bad name" }, []), /--table-name/);
});

test("cleanup removes only kpng's two tables, whether or not they exist", () => {
  assert.equal(
    cleanupTransaction("kpng"),
    "add table ip kpng\ndelete table ip kpng\nadd table ip6 kpng\ndelete table ip6 kpng\n",
  );
});

const ifs = [
  { ifname: "lo", addresses: [{ ip: "127.0.0.1", scope: "host" }] },
  {
    ifname: "eth0",
    addresses: [
      { ip: "192.0.2.1", scope: "global" },
      { ip: "fe80::1", scope: "link" },
    ],
  },
  {
    ifname: "eth1",
    addresses: [
      { ip: "198.51.100.1", scope: "global" },
      { ip: "2001:db8::1", scope: "global" },
    ],
  },
];

test("primary addresses: the default-route interface's, else all global ones; never loopback", () => {
  assert.deepEqual(primaryAddresses(["eth0"], ifs), ["192.0.2.1", "2001:db8::1"]);
  assert.deepEqual(primaryAddresses([], ifs), ["192.0.2.1", "198.51.100.1", "2001:db8::1"]);
  assert.deepEqual(primaryAddresses(["lo"], ifs.slice(0, 1)), []);
});

test("--masquerade-bit (kube-proxy's masqueradeBit) sets the mark the masquerade chains use", () => {
  const rules = (bit?: string) => {
    const [v4] = tableConfigs({ ...settings, masqueradeBit: bit }, []);
    assert.ok(v4);
    return skeletonOps(v4)
      .flatMap((op) => ("rule" in op ? [op.rule] : []))
      .filter((r) => r.includes("meta mark"));
  };
  assert.deepEqual(rules(), [
    "meta mark set meta mark | 0x4000",
    "meta mark & 0x4000 == 0 return",
    "meta mark set meta mark ^ 0x4000",
  ]);
  assert.deepEqual(rules("0"), [
    "meta mark set meta mark | 0x1",
    "meta mark & 0x1 == 0 return",
    "meta mark set meta mark ^ 0x1",
  ]);
  assert.ok(rules("31").every((r) => r.includes("0x80000000")));
  assert.throws(
    () => tableConfigs({ ...settings, masqueradeBit: "32" }, []),
    /--masquerade-bit: "32" is not a bit/,
  );
});

test("beside socket balancing, the node's own packets meet only the rules for what the programs pass on", () => {
  const [v4] = tableConfigs(settings, []);
  assert.ok(v4);
  const chainRules = (cfg: typeof v4, chain: string) =>
    skeletonOps(cfg).flatMap((op) => (op.kind === "rule" && op.chain === chain ? [op.rule] : []));
  assert.deepEqual(chainRules(v4, "nat-output"), ["jump services"]);
  const balanced = { ...v4, socketBalanced: true };
  assert.deepEqual(chainRules(balanced, "nat-output"), [
    "meta l4proto sctp jump services",
    "ip daddr . meta l4proto . th dport @firewall-ips jump services",
  ]);
  // The drops (Local policies, unallocated Service IPs, source ranges) stay for the node's packets.
  assert.deepEqual(chainRules(balanced, "filter-output"), chainRules(v4, "filter-output"));
  assert.deepEqual(
    chainRules(balanced, "filter-output-post-dnat"),
    chainRules(v4, "filter-output-post-dnat"),
  );
  // Traffic from other machines is served exactly as by to-nft.
  assert.deepEqual(chainRules(balanced, "nat-prerouting"), chainRules(v4, "nat-prerouting"));
});
