// kube-proxy's two packet metrics of iptables mode, from the rules' own counters: what they
// gained is added, and a rewritten chain (counters back at 0) loses nothing already counted.

import assert from "node:assert/strict";
import { test } from "node:test";
import { IptablesBackend } from "../../../../src/backends/iptables/backend.ts";
import { countedPackets, PacketCounters } from "../../../../src/backends/iptables/packet-counters.ts";
import { CT_INVALID_DROP } from "../../../../src/backends/iptables/ruleset.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { registry } from "../../../../src/observability/metrics.ts";
import { FakeIptables } from "../../../support/fake-iptables.ts";
import { ep, port, service, state, V4 } from "./fixtures.ts";

const value = async (name: string) =>
  (await registry.getMetricsAsJSON()).find((m) => m.name === name)?.values[0]?.value ?? 0;

test("countedPackets: the -c packets of the rules kept, wherever -c stands", () => {
  const listing = [
    "-N KPNG-FORWARD",
    "-A KPNG-FORWARD -m conntrack --ctstate INVALID -c 7 420 -j DROP",
    "-A KPNG-FORWARD -d 10.0.0.1/32 -c 5 300 -j ACCEPT",
  ].join("\n");
  assert.equal(
    countedPackets(listing, (r) => r === CT_INVALID_DROP),
    7,
  );
});

test("counters are read at scrape time and before each IPv4 sync; a rewrite restarts them without loss", async () => {
  const ipt = new FakeIptables();
  const cfg = { ...V4, localhostNodePorts: true, nodePortCIDRs: ["127.0.0.0/8"] };
  const counters = new PacketCounters(ipt, {
    dropInvalid: true,
    localhostNodePorts: true,
    log: silentLogger,
  });
  const backend = new IptablesBackend({
    runner: ipt,
    families: [cfg],
    log: silentLogger,
    packetCounters: counters,
  });
  const np = (endpoint: string) =>
    service({
      name: "np",
      type: "NodePort",
      ports: [
        port({
          nodePort: 30080,
          internalEndpoints: [ep(endpoint)],
          externalEndpoints: [ep(endpoint)],
        }),
      ],
    });
  await backend.sync(state([np("10.1.0.1")]));
  const localhostRule = ipt
    .rules("IPv4", "nat", "KPNG-NODEPORTS")
    ?.find((r) => r.startsWith("-d 127.0.0.0/8"));
  assert.ok(localhostRule, "a localhost rule per node port");
  const base = {
    invalid: await value("kubeproxy_iptables_ct_state_invalid_dropped_packets_total"),
    localhost: await value("kubeproxy_iptables_localhost_nodeports_accepted_packets_total"),
  };
  counters.start();
  try {
    ipt.packets.set(`IPv4/filter/${CT_INVALID_DROP}`, 4);
    ipt.packets.set(`IPv4/nat/-A KPNG-NODEPORTS ${localhostRule}`, 2);
    assert.equal(await value("kubeproxy_iptables_ct_state_invalid_dropped_packets_total"), base.invalid + 4);
    assert.equal(
      await value("kubeproxy_iptables_localhost_nodeports_accepted_packets_total"),
      base.localhost + 2,
    );
    // One more connection, then a full sync that rewrites KPNG-NODEPORTS (its counters restart at 0):
    // read before the rewrite, it is counted; then one after it.
    ipt.packets.set(`IPv4/nat/-A KPNG-NODEPORTS ${localhostRule}`, 3);
    await backend.sync(state([np("10.1.0.1")], 2), true);
    assert.equal(ipt.packets.get(`IPv4/nat/-A KPNG-NODEPORTS ${localhostRule}`), undefined, "rewritten");
    ipt.packets.set(`IPv4/nat/-A KPNG-NODEPORTS ${localhostRule}`, 1);
    assert.equal(
      await value("kubeproxy_iptables_localhost_nodeports_accepted_packets_total"),
      base.localhost + 4,
    );
    assert.equal(await value("kubeproxy_iptables_ct_state_invalid_dropped_packets_total"), base.invalid + 4);
  } finally {
    counters.stop();
  }
});
