import assert from "node:assert/strict";
import { test } from "node:test";
import { portChain } from "../../../../src/backends/iptables/names.ts";
import { serviceRules } from "../../../../src/backends/iptables/render-service.ts";
import { ep, port, service, V4, V6 } from "./fixtures.ts";

const SP = "default/web/tcp/80";
const SVC = portChain.internal(SP);
const EXT = portChain.external(SP);
const sep = (ip: string, p = 8080) => portChain.endpoint(SP, ip, p);

test("chain names fit iptables' 28-character limit and differ per service port", () => {
  const names = [
    SVC,
    EXT,
    portChain.firewall(SP),
    portChain.externalEndpoints(SP),
    portChain.hairpin(SVC),
    sep("2001:db8::1"),
  ];
  for (const n of names) assert.ok(n.length <= 28, n);
  assert.notEqual(portChain.internal("default/web/tcp/81"), SVC);
});

test("ClusterIP: dispatch, masquerade of non-pod sources, 1/N picks that DNAT, hairpin by source", () => {
  const r = serviceRules(service(), V4);
  assert.deepEqual(r.natServices, [
    `-A KPNG-SERVICES -d 203.0.113.10/32 -p tcp -m tcp --dport 80 -m comment --comment "default/web:http_cluster_IP" -j ${SVC}`,
  ]);
  const hp = portChain.hairpin(SVC);
  const half = "-m statistic --mode random --probability 0.5000000000";
  assert.deepEqual(r.chains.get(SVC), [
    `-A ${SVC} -d 203.0.113.10/32 -p tcp -m tcp --dport 80 -j KPNG-MASQ-NON-POD`,
    `-A ${SVC} -s 198.51.100.2/32 ${half} -j ${hp}`,
    `-A ${SVC} ! -s 198.51.100.2/32 ${half} -p tcp -j DNAT --to-destination 198.51.100.2:8080`,
    `-A ${SVC} -s 198.51.100.3/32 -j ${hp}`,
    `-A ${SVC} -p tcp -j DNAT --to-destination 198.51.100.3:8080`,
  ]);
  assert.deepEqual(r.chains.get(hp), [
    `-A ${hp} -j KPNG-MARK-MASQ`,
    `-A ${hp} -s 198.51.100.2/32 -p tcp -j DNAT --to-destination 198.51.100.2:8080`,
    `-A ${hp} -s 198.51.100.3/32 -p tcp -j DNAT --to-destination 198.51.100.3:8080`,
  ]);
  assert.deepEqual([...r.chains.keys()].sort(), [SVC, hp].sort(), "no chain per endpoint");
  assert.deepEqual(r.clusterIPs, ["203.0.113.10"]);
  assert.deepEqual(r.filterServices, []);
});

test("three endpoints get probabilities 1/3, 1/2, then the rest, the same for hairpin sources", () => {
  const eps = [ep("198.51.100.2"), ep("198.51.100.3"), ep("198.51.100.4")];
  const rules =
    serviceRules(service({ ports: [port({ internalEndpoints: eps })] }), V4).chains.get(SVC) ?? [];
  assert.equal(rules.length, 7);
  for (const [i, p] of [
    [1, /--probability 0\.3333333333 /],
    [2, /--probability 0\.3333333333 /],
    [3, /--probability 0\.5000000000 /],
    [4, /--probability 0\.5000000000 /],
  ] as const)
    assert.match(rules[i] ?? "", p);
  assert.doesNotMatch(rules[5] ?? "", /statistic/);
  assert.doesNotMatch(rules[6] ?? "", /statistic|! -s/);
});

test("one endpoint: no draw, no hairpin chain, the hairpin mark inline", () => {
  const r = serviceRules(service({ ports: [port({ internalEndpoints: [ep("198.51.100.2")] })] }), V4);
  assert.deepEqual(r.chains.get(SVC)?.slice(1), [
    `-A ${SVC} -s 198.51.100.2/32 -j KPNG-MARK-MASQ`,
    `-A ${SVC} -p tcp -j DNAT --to-destination 198.51.100.2:8080`,
  ]);
  assert.equal(r.chains.size, 1);
});

test("endpoints sharing an address keep a chain per endpoint (the source cannot tell them apart)", () => {
  const eps = [ep("198.51.100.2", 8080), ep("198.51.100.2", 8081)];
  const r = serviceRules(service({ ports: [port({ internalEndpoints: eps })] }), V4);
  assert.deepEqual(r.chains.get(SVC)?.slice(1), [
    `-A ${SVC} -m statistic --mode random --probability 0.5000000000 -j ${sep("198.51.100.2")}`,
    `-A ${SVC} -j ${sep("198.51.100.2", 8081)}`,
  ]);
  assert.deepEqual(r.chains.get(sep("198.51.100.2", 8081)), [
    `-A ${sep("198.51.100.2", 8081)} -s 198.51.100.2/32 -j KPNG-MARK-MASQ`,
    `-A ${sep("198.51.100.2", 8081)} -p tcp -j DNAT --to-destination 198.51.100.2:8081`,
  ]);
});

test("no endpoints anywhere rejects; endpoints elsewhere but none allowed here drops", () => {
  const none = serviceRules(service({ ports: [port({ internalEndpoints: [], externalEndpoints: [] })] }), V4);
  assert.equal(none.chains.size, 0);
  assert.match(none.filterServices[0] ?? "", /-d 203\.0\.113\.10\/32 -p tcp -m tcp --dport 80 .*-j REJECT$/);
  const local = serviceRules(
    service({
      ports: [port({ internalEndpoints: [], endpointFamilies: ["IPv4"], hasEndpoints: true })],
    }),
    V4,
  );
  assert.match(local.filterServices[0] ?? "", /-j DROP$/);
});

test("ClientIP affinity: recent checks first, recent --set before the DNAT", () => {
  const r = serviceRules(service({ sessionAffinitySeconds: 30 }), V4);
  const rules = r.chains.get(SVC) ?? [];
  assert.equal(
    rules[1],
    `-A ${SVC} -m recent --rcheck --seconds 30 --reap --name ${sep("198.51.100.2")} --rsource -j ${sep("198.51.100.2")}`,
  );
  assert.match(
    r.chains.get(sep("198.51.100.2"))?.[1] ?? "",
    /-m recent --set --name KPNG-SEP-\S+ --rsource -j DNAT/,
  );
});

test("NodePort under eTP Cluster: masquerade, then the endpoints; no nodeport without node-port addresses", () => {
  const svc = service({ type: "NodePort", ports: [port({ nodePort: 30080 })] });
  const r = serviceRules(svc, V4);
  assert.deepEqual(r.natNodePorts, [
    `-A KPNG-NODEPORTS -p tcp -m tcp --dport 30080 -m comment --comment "default/web:http" -j ${EXT}`,
  ]);
  assert.deepEqual(r.chains.get(EXT), [`-A ${EXT} -j KPNG-MARK-MASQ`, `-A ${EXT} -g ${SVC}`]);
  assert.deepEqual(serviceRules(svc, { ...V4, nodePortCIDRs: [] }).natNodePorts, []);
});

test("eTP Local: pods and the node short-circuit to the cluster chain, others go to local endpoints", () => {
  const local = [ep("198.51.100.2", 8080, { local: true })];
  const svc = service({
    type: "NodePort",
    externalTrafficPolicy: "Local",
    ports: [port({ nodePort: 30080, externalEndpoints: local })],
  });
  const r = serviceRules(svc, V4);
  const xep = portChain.externalEndpoints(SP);
  assert.deepEqual(r.chains.get(EXT), [
    `-A ${EXT} -s 10.244.0.0/16 -g ${SVC}`,
    `-A ${EXT} -m addrtype --src-type LOCAL -j KPNG-MARK-MASQ`,
    `-A ${EXT} -m addrtype --src-type LOCAL -g ${SVC}`,
    `-A ${EXT} -g ${xep}`,
  ]);
  assert.deepEqual(r.chains.get(xep), [
    `-A ${xep} -s 198.51.100.2/32 -j KPNG-MARK-MASQ`,
    `-A ${xep} -p tcp -j DNAT --to-destination 198.51.100.2:8080`,
  ]);
  // No local endpoint: the node port drops in the filter table.
  const none = serviceRules(
    service({ ...svc, ports: [port({ nodePort: 30080, externalEndpoints: [] })] }),
    V4,
  );
  assert.deepEqual(none.filterNodePorts, [
    `-A KPNG-NODEPORTS -d 192.0.2.1/32 -p tcp -m tcp --dport 30080 -m comment --comment "default/web:http" -j DROP`,
  ]);
});

test("load balancer with source ranges: the firewall chain DNATs allowed sources; filter drops the rest", () => {
  const svc = service({
    type: "LoadBalancer",
    loadBalancerIPs: ["203.0.113.200"],
    sourceRanges: ["192.0.2.0/24", "2001:db8::/64"],
  });
  const r = serviceRules(svc, V4);
  const fw = portChain.firewall(SP);
  // 192.0.2.0/24 holds the node IP: the LB IP itself is an allowed source too.
  assert.deepEqual(r.chains.get(fw), [
    `-A ${fw} -s 192.0.2.0/24 -g ${EXT}`,
    `-A ${fw} -s 203.0.113.200/32 -g ${EXT}`,
  ]);
  assert.ok(r.natServices.some((l) => l.includes("-d 203.0.113.200/32") && l.endsWith(`-j ${fw}`)));
  assert.match(
    r.filterFirewall[0] ?? "",
    /^-A KPNG-FIREWALL -d 203\.0\.113\.200\/32 -p tcp -m tcp --dport 80 .*-j DROP$/,
  );
});

test("a family carries a service only when it has a cluster IP there; endpoints are filtered by family", () => {
  assert.equal(serviceRules(service(), V6).chains.size, 0);
  const dual = service({
    clusterIPs: ["203.0.113.10", "2001:db8:2::10"],
    ports: [port({ internalEndpoints: [ep("198.51.100.2"), ep("2001:db8:1::2")] })],
  });
  const r6 = serviceRules(dual, V6);
  assert.deepEqual(r6.chains.get(SVC)?.slice(1), [
    `-A ${SVC} -s 2001:db8:1::2/128 -j KPNG-MARK-MASQ`,
    `-A ${SVC} -p tcp -j DNAT --to-destination [2001:db8:1::2]:8080`,
  ]);
});

test("masquerade-all marks every ClusterIP connection; ExternalName renders nothing", () => {
  const r = serviceRules(service(), { ...V4, masqueradeAll: true });
  assert.equal(
    r.chains.get(SVC)?.[0],
    `-A ${SVC} -d 203.0.113.10/32 -p tcp -m tcp --dport 80 -j KPNG-MARK-MASQ`,
  );
  assert.equal(serviceRules(service({ type: "ExternalName" }), V4).chains.size, 0);
});

test("SCTP and UDP ports match on their own protocol", () => {
  const r = serviceRules(service({ ports: [port({ protocol: "SCTP" })] }), V4);
  assert.match(r.natServices[0] ?? "", /-p sctp -m sctp --dport 80/);
});
