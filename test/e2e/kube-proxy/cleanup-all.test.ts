// `kpng cleanup all` in a fresh network namespace holding what kpng's backends install (its nft
// tables; its KPNG- chains hooked into the built-in chains, in iptables-nft and iptables-legacy)
// beside kube-proxy's and another program's rules: kpng's objects go, everything else stays.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Netns, netnsSkipReason } from "../../support/netns.ts";
import { chainsOf, loadIptables, loadNft, rulesOf } from "./rulesets.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();

const KPNG_NFT = `table ip kpng {
  chain services { type nat hook prerouting priority dstnat; policy accept; tcp dport 80 drop; }
}
table ip6 kpng {
  chain services { type nat hook prerouting priority dstnat; policy accept; }
}
table ip other-app {
  chain input { type filter hook input priority 0; policy accept; }
}
`;

const IPTABLES = `*nat
:KPNG-SERVICES - [0:0]
:KPNG-POSTROUTING - [0:0]
:KUBE-SERVICES - [0:0]
-A PREROUTING -j KPNG-SERVICES
-A OUTPUT -j KPNG-SERVICES
-A POSTROUTING -j KPNG-POSTROUTING
-A PREROUTING -j KUBE-SERVICES
-A POSTROUTING -s 192.0.2.0/24 -j MASQUERADE
-A KPNG-SERVICES -d 203.0.113.10/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 198.51.100.2:8080
COMMIT
*filter
:KPNG-FIREWALL - [0:0]
-A INPUT -m conntrack --ctstate NEW -j KPNG-FIREWALL
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
COMMIT
`;

describe("kpng cleanup all in a network namespace", { skip }, () => {
  let ns: Netns;
  before(async () => {
    ns = await Netns.create();
    await loadNft(ns, KPNG_NFT);
    for (const variant of ["nft", "legacy"]) await loadIptables(ns, `iptables-${variant}-restore`, IPTABLES);
  });
  after(async () => {
    await ns?.destroy();
  });

  test("removes kpng's nft tables and KPNG- chains with their jumps, in both variants; nothing else", async () => {
    const out = await ns.exec([process.execPath, MAIN, "cleanup", "all"], { timeoutMs: 60_000 });
    assert.equal(out.code, 0, out.stderr);
    const tables = (await ns.exec(["nft", "list", "tables"])).stdout;
    assert.doesNotMatch(tables, /kpng/);
    assert.match(tables, /table ip other-app/);
    for (const variant of ["nft", "legacy"]) {
      const save = (await ns.exec([`iptables-${variant}-save`])).stdout;
      assert.deepEqual(
        chainsOf(save).filter((c) => c.includes("KPNG-")),
        [],
        `${variant}: ${save}`,
      );
      assert.ok(!rulesOf(save).some((r) => r.includes("KPNG-")), `${variant}: ${save}`);
      for (const kept of [
        "-A PREROUTING -j KUBE-SERVICES",
        "-A POSTROUTING -s 192.0.2.0/24 -j MASQUERADE",
        "-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT",
      ])
        assert.ok(rulesOf(save).includes(kept), `${variant} keeps ${kept}: ${save}`);
    }
  });

  test("twice is harmless", async () => {
    const out = await ns.exec([process.execPath, MAIN, "cleanup", "all"], { timeoutMs: 60_000 });
    assert.equal(out.code, 0, out.stderr);
  });
});
