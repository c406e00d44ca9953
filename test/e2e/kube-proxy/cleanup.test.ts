// `kpng cleanup kube-proxy` and `kpng kube-proxy --cleanup` in a fresh network namespace loaded
// with rulesets shaped like each kube-proxy mode: kube-proxy's objects go, everything else stays.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { isKubeProxyChain } from "../../../src/host/kube-proxy-leftovers/iptables-plan.ts";
import { Netns, netnsSkipReason } from "../../support/netns.ts";
import {
  addDummies,
  chainsOf,
  IPTABLES_MODE,
  IPVS_MODE,
  loadIptables,
  loadNft,
  NFTABLES_MODE,
  rulesOf,
} from "./rulesets.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();

const IP6_IPTABLES_MODE = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-ERIFXISQEP7F7OF4 - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -d 2001:db8:2::10/128 -p tcp -m tcp --dport 80 -j KUBE-SVC-ERIFXISQEP7F7OF4
-A PREROUTING -p tcp -m tcp --dport 8080 -j REDIRECT --to-ports 80
COMMIT
`;

/** Rules of other programs in IPTABLES_MODE: all must survive. */
const FOREIGN_RULES = [
  "-A POSTROUTING -j OTHER-APP-NAT",
  "-A OTHER-APP-NAT -s 192.0.2.0/24 -j MASQUERADE",
  "-A INPUT -j KUBE-FIREWALL",
  "-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT",
  "-A INPUT -j OTHER-APP",
  "-A OUTPUT -j KUBE-FIREWALL",
  '-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP',
  "-A OTHER-APP -s 203.0.113.99/32 -j DROP",
];

function kubeProxyChains(save: string): string[] {
  return chainsOf(save).filter((tc) => {
    const [table = "", chain = ""] = tc.split(" ");
    return isKubeProxyChain(table, chain);
  });
}

describe("kube-proxy cleanup in a network namespace", { skip }, () => {
  let ns: Netns;

  before(async () => {
    ns = await Netns.create();
  });
  after(async () => {
    await ns?.destroy();
  });

  async function load(): Promise<void> {
    for (const link of ["kube-ipvs0", "other0"]) await ns.ip(["link", "del", link], { allowFailure: true });
    await loadIptables(ns, "iptables-nft-restore", IPTABLES_MODE);
    await loadIptables(ns, "ip6tables-nft-restore", IP6_IPTABLES_MODE);
    await loadIptables(ns, "iptables-legacy-restore", IPVS_MODE);
    await loadNft(ns, NFTABLES_MODE);
    await addDummies(ns);
  }

  async function save(cmd: string): Promise<string> {
    return (await ns.exec([cmd])).stdout;
  }

  async function checkCleaned(): Promise<void> {
    // iptables-nft, kube-proxy's iptables mode: only other programs' chains and rules are left.
    const nft4 = await save("iptables-nft-save");
    assert.deepEqual(kubeProxyChains(nft4), []);
    assert.deepEqual(rulesOf(nft4).sort(), [...FOREIGN_RULES].sort());
    for (const kept of [
      "filter KUBE-FIREWALL",
      "filter KUBE-KUBELET-CANARY",
      "nat KUBE-KUBELET-CANARY",
      "mangle KUBE-KUBELET-CANARY",
      "filter OTHER-APP",
      "nat OTHER-APP-NAT",
    ]) {
      assert.ok(chainsOf(nft4).includes(kept), `${kept} (not kube-proxy's) survives`);
    }
    const nft6 = await save("ip6tables-nft-save");
    assert.deepEqual(kubeProxyChains(nft6), []);
    assert.deepEqual(rulesOf(nft6), ["-A PREROUTING -p tcp -m tcp --dport 8080 -j REDIRECT --to-ports 80"]);

    // iptables-legacy, kube-proxy's ipvs mode: KUBE-MARK-MASQ stays, another program uses it.
    const legacy = await save("iptables-legacy-save");
    assert.deepEqual(kubeProxyChains(legacy), ["nat KUBE-MARK-MASQ"]);
    assert.deepEqual(rulesOf(legacy).sort(), [
      "-A INPUT -p udp -m udp --dport 53 -j ACCEPT",
      "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
      "-A PREROUTING -j SHARED-APP",
      "-A SHARED-APP -s 203.0.113.77/32 -j KUBE-MARK-MASQ",
    ]);

    // nftables mode: both kube-proxy tables gone, the others untouched.
    // (iptables-nft's own tables, filter, nat and mangle, hold the chains of other programs.)
    const tables = (await ns.exec(["nft", "list", "tables"])).stdout.trim().split("\n");
    const notIptables = tables.filter((t) => !/ (filter|nat|mangle)$/.test(t)).sort();
    assert.deepEqual(notIptables, ["table inet other-app", "table ip kpng"]);
    assert.match(
      (await ns.exec(["nft", "list", "table", "inet", "other-app"])).stdout,
      /tcp dport 8443 accept/,
    );

    // ipvs mode's dummy interface goes; another dummy stays.
    const links = (await ns.ip(["-o", "link", "show"])).stdout;
    assert.doesNotMatch(links, /kube-ipvs0/);
    assert.match(links, /other0/);
  }

  test("kpng cleanup kube-proxy removes every mode's objects and only those; a second run is a no-op", async () => {
    await load();
    const before = await save("iptables-nft-save");
    assert.equal(kubeProxyChains(before).length, 15, "the ruleset was loaded");
    const out = await ns.exec([process.execPath, MAIN, "cleanup", "kube-proxy"]);
    assert.match(out.stderr, /removed kube-proxy's leftovers/);
    await checkCleaned();
    await ns.exec([process.execPath, MAIN, "cleanup", "kube-proxy"]);
    await checkCleaned();
  });

  test("IPVS: kube-proxy's virtual servers go, another program's stays (only where the kernel has ip_vs)", async (t) => {
    const probe = await ns.exec(["ipvsadm", "-S", "-n"], { allowFailure: true });
    if (probe.code !== 0) {
      t.skip(`no IPVS in this kernel: ${probe.stderr.trim()}`);
      return;
    }
    for (const link of ["kube-ipvs0", "other0"]) await ns.ip(["link", "del", link], { allowFailure: true });
    await addDummies(ns);
    await ns.exec(["ipvsadm", "-A", "-t", "198.51.100.10:80", "-s", "rr"]);
    await ns.exec(["ipvsadm", "-A", "-t", "192.0.2.77:8443", "-s", "rr"]);
    await ns.exec([process.execPath, MAIN, "cleanup", "kube-proxy"]);
    const left = (await ns.exec(["ipvsadm", "-S", "-n"])).stdout;
    assert.doesNotMatch(left, /198\.51\.100\.10:80/);
    assert.match(left, /192\.0\.2\.77:8443/);
  });

  test("kube-proxy's own --cleanup flag means the same", async () => {
    await ns.exec(["nft", "flush", "ruleset"]);
    await ns.exec(["iptables-legacy", "-t", "nat", "-F"]);
    await ns.exec(["iptables-legacy", "-t", "nat", "-X"]);
    await ns.exec(["iptables-legacy", "-F"]);
    await load();
    await ns.exec([process.execPath, MAIN, "kube-proxy", "--cleanup"]);
    await checkCleaned();
  });
});
