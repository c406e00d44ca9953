// Rulesets shaped like what kube-proxy leaves in each of its modes, beside objects of other
// programs (kubelet, an unrelated firewall, kpng itself) that a cleanup must not touch.

import type { Netns } from "../../support/netns.ts";

/** kube-proxy's iptables mode (nat, filter, mangle), plus kubelet's chains and another program's. */
export const IPTABLES_MODE = `*mangle
:KUBE-PROXY-CANARY - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SVC-ERIFXISQEP7F7OF4 - [0:0]
:KUBE-SEP-ZP3FB6NMPNCO4VBJ - [0:0]
:KUBE-EXT-XPGD46QRK7WJZT7O - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:OTHER-APP-NAT - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A POSTROUTING -j OTHER-APP-NAT
-A OTHER-APP-NAT -s 192.0.2.0/24 -j MASQUERADE
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-SERVICES -d 198.51.100.10/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-ERIFXISQEP7F7OF4
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-NODEPORTS -p tcp -m comment --comment "default/web:http" -m tcp --dport 30080 -j KUBE-EXT-XPGD46QRK7WJZT7O
-A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-MARK-MASQ
-A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-SVC-ERIFXISQEP7F7OF4
-A KUBE-SVC-ERIFXISQEP7F7OF4 -j KUBE-SEP-ZP3FB6NMPNCO4VBJ
-A KUBE-SEP-ZP3FB6NMPNCO4VBJ -s 203.0.113.5/32 -j KUBE-MARK-MASQ
-A KUBE-SEP-ZP3FB6NMPNCO4VBJ -p tcp -m tcp -j DNAT --to-destination 203.0.113.5:8080
COMMIT
*filter
:KUBE-SERVICES - [0:0]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:OTHER-APP - [0:0]
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A INPUT -j KUBE-FIREWALL
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
-A INPUT -j OTHER-APP
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -j KUBE-FIREWALL
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-SERVICES -d 198.51.100.11/32 -p tcp -m comment --comment "default/empty:http has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
-A OTHER-APP -s 203.0.113.99/32 -j DROP
COMMIT
`;

/** kube-proxy's ipvs mode's iptables chains; another program's chain also uses KUBE-MARK-MASQ. */
export const IPVS_MODE = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-FIREWALL - [0:0]
:SHARED-APP - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A PREROUTING -j SHARED-APP
-A SHARED-APP -s 203.0.113.77/32 -j KUBE-MARK-MASQ
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
-A KUBE-FIREWALL -j KUBE-MARK-MASQ
COMMIT
*filter
:KUBE-FORWARD - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-IPVS-OUT-FILTER - [0:0]
-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODE-PORT
-A INPUT -p udp -m udp --dport 53 -j ACCEPT
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
-A KUBE-SOURCE-RANGES-FIREWALL -j DROP
COMMIT
`;

/** kube-proxy's nftables mode (both families), beside another program's table and kpng's. */
export const NFTABLES_MODE = `table ip kube-proxy {
  comment "rules for kube-proxy"
  set cluster-ips { type ipv4_addr; elements = { 198.51.100.10 } }
  map service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }
  chain services { ip daddr . meta l4proto . th dport vmap @service-ips; }
  chain nat-prerouting { type nat hook prerouting priority dstnat; policy accept; jump services; }
  chain nat-output { type nat hook output priority -100; policy accept; jump services; }
  chain reject-chain { reject; }
}
table ip6 kube-proxy {
  comment "rules for kube-proxy"
  chain nat-prerouting { type nat hook prerouting priority dstnat; policy accept; }
}
table inet other-app {
  chain input { type filter hook input priority filter; policy accept; tcp dport 8443 accept; }
}
table ip kpng {
  chain keep-me { counter; }
}
`;

export async function loadIptables(ns: Netns, restore: string, text: string): Promise<void> {
  await ns.exec([restore, "--noflush"], { stdin: text });
}

export async function loadNft(ns: Netns, text: string): Promise<void> {
  await ns.exec(["nft", "-f", "-"], { stdin: text });
}

/**
 * An interface named like kube-proxy's ipvs-mode dummy, with a Service IP, and an unrelated one.
 * veth pairs stand in for dummies: not every test kernel has the dummy driver.
 */
export async function addDummies(ns: Netns): Promise<void> {
  await ns.ip(["link", "add", "kube-ipvs0", "type", "veth", "peer", "name", "kipvs-peer"]);
  await ns.addAddress("kube-ipvs0", "198.51.100.10/32");
  await ns.ip(["link", "add", "other0", "type", "veth", "peer", "name", "other1"]);
}

/** Chain names per table from iptables-save output: "nat KUBE-SERVICES", … */
export function chainsOf(save: string): string[] {
  const out: string[] = [];
  let table = "";
  for (const line of save.split("\n")) {
    if (line.startsWith("*")) table = line.slice(1);
    else if (line.startsWith(":")) out.push(`${table} ${line.slice(1).split(" ")[0]}`);
  }
  return out;
}

/** Rules from iptables-save output, as saved. */
export function rulesOf(save: string): string[] {
  return save.split("\n").filter((l) => l.startsWith("-A "));
}
