import assert from "node:assert/strict";
import { test } from "node:test";
import type { Fragment } from "../../../../src/backends/nft/fragment.ts";
import { chainName } from "../../../../src/backends/nft/names.ts";
import { serviceFragment } from "../../../../src/backends/nft/render-service.ts";
import { ep, port, service, V4, V6 } from "./fixtures.ts";

const SP = "default/web/tcp/80";
const INT = chainName.internal(SP);
const EXT = chainName.external(SP);
const XEP = chainName.externalEndpoints(SP);
const FW = chainName.firewall(SP);

/** A set's elements as the table holds them: endpoint lists and hairpin addresses spelled out. */
function el(f: Fragment, set: string): Record<string, string> {
  const grouped = f.groups
    .filter((g) => g.set === set)
    .flatMap((g) => g.values.map((v, i): [string, string] => [`${g.prefix}${i}`, v]));
  const hairpins =
    set === "hairpin-endpoints" ? f.hairpins.map((ip): [string, string] => [`${ip} . ${ip}`, ""]) : [];
  return Object.fromEntries([
    ...f.elements.filter((e) => e.set === set).map((e) => [e.key, e.value]),
    ...grouped,
    ...hairpins,
  ]);
}
function rules(f: Fragment, name: string): readonly string[] | undefined {
  return [...f.chains, ...f.sharedChains].find((c) => c.name === name)?.rules;
}
const MASQ_NON_POD = "ip saddr != @pod-cidrs jump mark-for-masquerade";

interface Case {
  readonly name: string;
  readonly run: () => void;
}

const cases: Case[] = [
  {
    name: "ClusterIP with endpoints: no chain of its own, the shared pick chain draws from its endpoint elements",
    run: () => {
      const f = serviceFragment(service(), V4);
      assert.deepEqual(el(f, "service-ips"), { "203.0.113.10 . tcp . 80": "goto pick-tcp-2" });
      assert.deepEqual(el(f, "cluster-ips"), { "203.0.113.10": "" });
      assert.deepEqual(el(f, "endpoints-tcp"), {
        "203.0.113.10 . 80 . 0": "198.51.100.2 . 8080",
        "203.0.113.10 . 80 . 1": "198.51.100.3 . 8080",
      });
      assert.deepEqual(f.chains, []);
      assert.deepEqual(rules(f, "pick-tcp-2"), [
        MASQ_NON_POD,
        "meta l4proto tcp dnat ip to ip daddr . th dport . numgen random mod 2 map @endpoints-tcp",
      ]);
      // Both endpoints run on other nodes: neither can reach itself through this node.
      assert.deepEqual(el(f, "hairpin-endpoints"), {});
    },
  },
  {
    name: "hairpin elements only for endpoints on this node, or whose node is unknown",
    run: () => {
      const eps = [
        ep("198.51.100.2", 8080, { local: true }),
        ep("198.51.100.3"),
        ep("198.51.100.4", 8080, { nodeUnknown: true }),
      ];
      const f = serviceFragment(service({ ports: [port({ internalEndpoints: eps })] }), V4);
      assert.deepEqual(Object.keys(el(f, "hairpin-endpoints")).sort(), [
        "198.51.100.2 . 198.51.100.2",
        "198.51.100.4 . 198.51.100.4",
      ]);
    },
  },
  {
    name: "no endpoints anywhere: rejected, no chain",
    run: () => {
      const f = serviceFragment(service({ ports: [port({ internalEndpoints: [] })] }), V4);
      assert.deepEqual(el(f, "no-endpoint-services"), { "203.0.113.10 . tcp . 80": "goto reject-chain" });
      assert.equal(f.chains.length, 0);
    },
  },
  {
    name: "iTP Local without local endpoints (endpoints elsewhere): dropped",
    run: () => {
      const p = port({
        internalEndpoints: [],
        externalEndpoints: [],
        hasEndpoints: true,
        endpointFamilies: ["IPv4"],
      });
      const f = serviceFragment(service({ internalTrafficPolicy: "Local", ports: [p] }), V4);
      assert.deepEqual(el(f, "no-endpoint-services"), { "203.0.113.10 . tcp . 80": "drop" });
    },
  },
  {
    name: "masquerade-all masquerades every ClusterIP connection; no cluster CIDR and not all: none",
    run: () => {
      const all = serviceFragment(service(), { ...V4, masqueradeAll: true });
      assert.equal(rules(all, "pick-tcp-2")?.[0], "jump mark-for-masquerade");
      const none = serviceFragment(service(), { ...V4, podCIDRs: [] });
      assert.equal(rules(none, "pick-tcp-2")?.length, 1);
      assert.ok(!rules(none, "pick-tcp-2")?.some((r) => r.includes("mark-for-masquerade")));
    },
  },
  {
    name: "NodePort eTP Cluster: the node port's pick chain masquerades, then draws from the node port's elements",
    run: () => {
      const f = serviceFragment(service({ type: "NodePort", ports: [port({ nodePort: 30080 })] }), V4);
      assert.deepEqual(el(f, "service-nodeports"), { "tcp . 30080": "goto nodeport-pick-tcp-2" });
      assert.deepEqual(el(f, "nodeport-endpoints-tcp"), {
        "30080 . 0": "198.51.100.2 . 8080",
        "30080 . 1": "198.51.100.3 . 8080",
      });
      assert.deepEqual(rules(f, "nodeport-pick-tcp-2"), [
        "jump mark-for-masquerade",
        "meta l4proto tcp dnat ip to th dport . numgen random mod 2 map @nodeport-endpoints-tcp",
      ]);
      assert.deepEqual(f.chains, []);
    },
  },
  {
    name: "NodePort is not served in a family without nodeport addresses",
    run: () => {
      const f = serviceFragment(service({ type: "NodePort", ports: [port({ nodePort: 30080 })] }), {
        ...V4,
        nodePortCIDRs: [],
      });
      assert.deepEqual(el(f, "service-nodeports"), {});
    },
  },
  {
    name: "eTP Local: pods and the node short-circuit to the internal chain, others go to local endpoints",
    run: () => {
      const local = ep("198.51.100.2", 8080, { local: true });
      const p = port({ nodePort: 30080, externalEndpoints: [local] });
      const f = serviceFragment(
        service({ type: "NodePort", externalTrafficPolicy: "Local", ports: [p] }),
        V4,
      );
      assert.deepEqual(rules(f, EXT), [
        `ip saddr @pod-cidrs goto ${INT}`,
        "fib saddr type local jump mark-for-masquerade",
        `fib saddr type local goto ${INT}`,
        `goto ${XEP}`,
      ]);
      assert.deepEqual(rules(f, XEP), ["meta l4proto tcp dnat to 198.51.100.2:8080"]);
      // The short-circuit chain does not masquerade: pods keep their address, the node is marked above.
      assert.deepEqual(rules(f, INT), [
        "numgen random mod 2 0 meta l4proto tcp dnat to 198.51.100.2:8080",
        "meta l4proto tcp dnat to 198.51.100.3:8080",
      ]);
      // ClusterIP traffic still goes through the shared pick chain.
      assert.equal(el(f, "service-ips")["203.0.113.10 . tcp . 80"], "goto pick-tcp-2");
    },
  },
  {
    name: "eTP Local without local endpoints: node ports and VIPs dropped, no goto to local endpoints",
    run: () => {
      const p = port({ nodePort: 30080, externalEndpoints: [] });
      const svc = service({
        type: "LoadBalancer",
        externalTrafficPolicy: "Local",
        loadBalancerIPs: ["203.0.113.200"],
        ports: [p],
      });
      const f = serviceFragment(svc, V4);
      assert.deepEqual(el(f, "no-endpoint-nodeports"), { "tcp . 30080": "drop" });
      assert.deepEqual(el(f, "no-endpoint-services"), { "203.0.113.200 . tcp . 80": "drop" });
      assert.ok(!rules(f, EXT)?.some((r) => r.startsWith("goto xep")));
    },
  },
  {
    name: "externalIPs and LB IPs with eTP Cluster: the VIP pick chain masquerades and draws from the VIP's elements",
    run: () => {
      const svc = service({
        type: "LoadBalancer",
        externalIPs: ["198.51.100.200"],
        loadBalancerIPs: ["203.0.113.200"],
      });
      const f = serviceFragment(svc, V4);
      assert.equal(el(f, "service-ips")["198.51.100.200 . tcp . 80"], "goto ext-pick-tcp-2");
      assert.equal(el(f, "service-ips")["203.0.113.200 . tcp . 80"], "goto ext-pick-tcp-2");
      assert.equal(el(f, "endpoints-tcp")["203.0.113.200 . 80 . 1"], "198.51.100.3 . 8080");
      assert.deepEqual(rules(f, "ext-pick-tcp-2"), [
        "jump mark-for-masquerade",
        "meta l4proto tcp dnat ip to ip daddr . th dport . numgen random mod 2 map @endpoints-tcp",
      ]);
    },
  },
  {
    name: "ClientIP affinity keeps chains of its own for ClusterIP and NodePort traffic",
    run: () => {
      const f = serviceFragment(
        service({ type: "NodePort", sessionAffinitySeconds: 3, ports: [port({ nodePort: 30080 })] }),
        V4,
      );
      assert.deepEqual(el(f, "service-ips"), { "203.0.113.10 . tcp . 80": `goto ${INT}` });
      assert.deepEqual(el(f, "service-nodeports"), { "tcp . 30080": `goto ${EXT}` });
      assert.deepEqual(rules(f, EXT), ["jump mark-for-masquerade", `goto ${INT}`]);
      assert.equal(
        rules(f, INT)?.[0],
        "ip daddr 203.0.113.10 meta l4proto tcp th dport 80 ip saddr != @pod-cidrs jump mark-for-masquerade",
      );
      assert.deepEqual(f.sharedChains, []);
    },
  },
  {
    name: "source ranges: firewall allows the ranges, and the LB IP when a range holds a node IP",
    run: () => {
      const svc = service({
        type: "LoadBalancer",
        loadBalancerIPs: ["203.0.113.200"],
        sourceRanges: ["198.51.100.0/24", "192.0.2.0/24", "2001:db8::/64"],
      });
      const f = serviceFragment(svc, V4);
      assert.deepEqual(el(f, "firewall-ips"), { "203.0.113.200 . tcp . 80": `goto ${FW}` });
      assert.deepEqual(rules(f, FW), [
        "ip saddr 198.51.100.0/24 return",
        "ip saddr 192.0.2.0/24 return",
        "ip saddr 203.0.113.200 return",
        "drop",
      ]);
    },
  },
  {
    name: "ClientIP affinity: one dynamic set per endpoint, sticky rules before the random pick",
    run: () => {
      const f = serviceFragment(service({ sessionAffinitySeconds: 3 }), V4);
      assert.equal(f.affinitySets.length, 2);
      assert.ok(f.affinitySets.every((s) => s.timeoutSeconds === 3));
      const [a, b] = f.affinitySets.map((s) => s.name);
      assert.deepEqual(rules(f, INT)?.slice(1), [
        `ip saddr @${a} update @${a} { ip saddr } meta l4proto tcp dnat to 198.51.100.2:8080`,
        `ip saddr @${b} update @${b} { ip saddr } meta l4proto tcp dnat to 198.51.100.3:8080`,
        `numgen random mod 2 0 update @${a} { ip saddr } meta l4proto tcp dnat to 198.51.100.2:8080`,
        `update @${b} { ip saddr } meta l4proto tcp dnat to 198.51.100.3:8080`,
      ]);
    },
  },
  {
    name: "dual-stack: each family's table gets its own cluster IP and endpoints only",
    run: () => {
      const eps = [ep("198.51.100.2"), ep("2001:db8:1::2")];
      const p = port({
        internalEndpoints: eps,
        externalEndpoints: eps,
        endpointFamilies: ["IPv4", "IPv6"],
      });
      const svc = service({ clusterIPs: ["203.0.113.10", "2001:db8:96::a"], ports: [p] });
      const f6 = serviceFragment(svc, V6);
      assert.deepEqual(el(f6, "service-ips"), { "2001:db8:96::a . tcp . 80": "goto pick-tcp-1" });
      assert.deepEqual(el(f6, "endpoints-tcp"), { "2001:db8:96::a . 80 . 0": "2001:db8:1::2 . 8080" });
      assert.deepEqual(rules(f6, "pick-tcp-1"), [
        "ip6 saddr != @pod-cidrs jump mark-for-masquerade",
        "meta l4proto tcp dnat ip6 to ip6 daddr . th dport . numgen random mod 1 map @endpoints-tcp",
      ]);
      assert.deepEqual(el(serviceFragment(svc, V4), "endpoints-tcp"), {
        "203.0.113.10 . 80 . 0": "198.51.100.2 . 8080",
      });
    },
  },
  {
    name: "a single-stack IPv4 service is absent from the IPv6 table",
    run: () => assert.deepEqual(serviceFragment(service(), V6).elements, []),
  },
  {
    name: "IPv6 endpoints only: the IPv4 table rejects (no endpoints in its family)",
    run: () => {
      const p = port({
        internalEndpoints: [],
        externalEndpoints: [],
        hasEndpoints: true,
        endpointFamilies: ["IPv6"],
      });
      const f = serviceFragment(service({ ports: [p] }), V4);
      assert.deepEqual(el(f, "no-endpoint-services"), { "203.0.113.10 . tcp . 80": "goto reject-chain" });
    },
  },
  {
    name: "UDP and SCTP ports use their protocol in keys and DNAT",
    run: () => {
      const f = serviceFragment(
        service({ ports: [port({ protocol: "UDP", port: 53 }), port({ protocol: "SCTP", port: 9 })] }),
        V4,
      );
      assert.deepEqual(Object.keys(el(f, "service-ips")).sort(), [
        "203.0.113.10 . sctp . 9",
        "203.0.113.10 . udp . 53",
      ]);
      assert.deepEqual(el(f, "service-ips")["203.0.113.10 . udp . 53"], "goto pick-udp-2");
      assert.deepEqual(Object.keys(el(f, "endpoints-sctp")), [
        "203.0.113.10 . 9 . 0",
        "203.0.113.10 . 9 . 1",
      ]);
      assert.match(rules(f, "pick-udp-2")?.[1] ?? "", /^meta l4proto udp dnat ip to .* map @endpoints-udp$/);
    },
  },
  {
    name: "beside socket balancing: no eTP Local short-circuit of the node's sources, no hairpin elements",
    run: () => {
      const local = ep("198.51.100.2", 8080, { local: true });
      const p = port({
        nodePort: 30080,
        internalEndpoints: [local, ep("198.51.100.3")],
        externalEndpoints: [local],
      });
      const f = serviceFragment(service({ type: "NodePort", externalTrafficPolicy: "Local", ports: [p] }), {
        ...V4,
        socketBalanced: true,
      });
      // Pods of other nodes still short-circuit; this node's own sockets never reach the rules.
      assert.deepEqual(rules(f, EXT), [`ip saddr @pod-cidrs goto ${INT}`, `goto ${XEP}`]);
      assert.deepEqual(el(f, "hairpin-endpoints"), {});
      assert.equal(el(f, "service-nodeports")["tcp . 30080"], `goto ${EXT}`);
    },
  },
  {
    name: "beside socket balancing: what the programs pass on (SCTP, LB IPs with source ranges) keeps its node rules",
    run: () => {
      const local = ep("198.51.100.2", 8080, { local: true });
      const cfg = { ...V4, socketBalanced: true };
      const sctp = serviceFragment(
        service({
          ports: [port({ protocol: "SCTP", port: 9, internalEndpoints: [local] })],
        }),
        cfg,
      );
      assert.deepEqual(Object.keys(el(sctp, "hairpin-endpoints")), ["198.51.100.2 . 198.51.100.2"]);
      const lb = serviceFragment(
        service({
          type: "LoadBalancer",
          loadBalancerIPs: ["203.0.113.200"],
          sourceRanges: ["192.0.2.0/24"],
          ports: [port({ internalEndpoints: [local], externalEndpoints: [local] })],
        }),
        cfg,
      );
      assert.deepEqual(Object.keys(el(lb, "hairpin-endpoints")), ["198.51.100.2 . 198.51.100.2"]);
    },
  },
];

for (const c of cases) test(c.name, c.run);
