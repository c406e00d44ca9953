// Which endpoints went away from a Service's UDP and SCTP ports, row by row as kube-proxy's
// conntrack cleanup states its rules. A pair is written `PROTOCOL frontend -> endpoint`, the
// frontend `*:nodePort` for a node port on any node address.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type GoneEndpoint, goneEndpoints } from "../../../src/model/gone-endpoints.ts";
import type { LocalEndpoint, LocalService } from "../../../src/model/local.ts";
import type { LocalServiceOverrides } from "../../support/local-service.ts";
import { ep, port, service } from "../backends/nft/fixtures.ts";

const A = ep("198.51.100.2", 5353);
const B = ep("198.51.100.3", 5353);

/** The UDP Service "dns" on 203.0.113.10:53 with `eps` for both kinds of traffic. */
const dns = (eps: LocalEndpoint[], over: LocalServiceOverrides = {}, portOver = {}) =>
  service({
    name: "dns",
    ports: [port({ name: "dns", protocol: "UDP", port: 53, internalEndpoints: eps, ...portOver })],
    ...over,
  });

const show = (g: GoneEndpoint) =>
  `${g.protocol} ${g.address === undefined ? "*" : g.address.includes(":") ? `[${g.address}]` : g.address}:${g.port} -> ${g.endpoint.ip}:${g.endpoint.port}`;

const rows: {
  rule: string;
  before: LocalService | undefined;
  after: LocalService | undefined;
  gone: string[];
}[] = [
  {
    rule: "an endpoint that leaves the port: flows to the cluster IP it served are stale",
    before: dns([A, B]),
    after: dns([B]),
    gone: ["UDP 203.0.113.10:53 -> 198.51.100.2:5353"],
  },
  {
    rule: "an endpoint that stays: nothing is stale",
    before: dns([A, B]),
    after: dns([B, A]),
    gone: [],
  },
  {
    rule: "a new endpoint: nothing went away",
    before: dns([A]),
    after: dns([A, B]),
    gone: [],
  },
  {
    rule: "flows entered at each external IP and load-balancer IP, and at the node port on any node address",
    before: dns([A, B], { externalIPs: ["192.0.2.9"], loadBalancerIPs: ["192.0.2.10"] }, { nodePort: 30053 }),
    after: dns([B], { externalIPs: ["192.0.2.9"], loadBalancerIPs: ["192.0.2.10"] }, { nodePort: 30053 }),
    gone: [
      "UDP 203.0.113.10:53 -> 198.51.100.2:5353",
      "UDP 192.0.2.9:53 -> 198.51.100.2:5353",
      "UDP 192.0.2.10:53 -> 198.51.100.2:5353",
      "UDP *:30053 -> 198.51.100.2:5353",
    ],
  },
  {
    rule: "the Service deleted: every endpoint of it went away",
    before: dns([A, B]),
    after: undefined,
    gone: ["UDP 203.0.113.10:53 -> 198.51.100.2:5353", "UDP 203.0.113.10:53 -> 198.51.100.3:5353"],
  },
  {
    rule: "a new Service: nothing went away",
    before: undefined,
    after: dns([A]),
    gone: [],
  },
  {
    rule: "the port renumbered: the old port's flows are all stale",
    before: dns([A]),
    after: service({
      name: "dns",
      ports: [port({ name: "dns", protocol: "UDP", port: 54, internalEndpoints: [A] })],
    }),
    gone: ["UDP 203.0.113.10:53 -> 198.51.100.2:5353"],
  },
  {
    rule: "the target port changed: flows to the old one are stale",
    before: dns([A]),
    after: dns([{ ...A, port: 5354 }]),
    gone: ["UDP 203.0.113.10:53 -> 198.51.100.2:5353"],
  },
  {
    rule: "traffic policies are not taken into account: an endpoint in either list still serves the port",
    before: dns([A, B]),
    after: dns([A, B], {}, { externalEndpoints: [B] }),
    gone: [],
  },
  {
    rule: "an endpoint only external traffic went to, gone too",
    before: dns([B], {}, { externalEndpoints: [A], nodePort: 30053 }),
    after: dns([B], {}, { externalEndpoints: [], nodePort: 30053 }),
    gone: ["UDP 203.0.113.10:53 -> 198.51.100.2:5353", "UDP *:30053 -> 198.51.100.2:5353"],
  },
  {
    rule: "TCP: nothing (a connection to a gone endpoint fails, and the client connects again)",
    before: service({ ports: [port({ internalEndpoints: [A, B] })] }),
    after: service({ ports: [port({ internalEndpoints: [B] })] }),
    gone: [],
  },
  {
    rule: "SCTP as UDP",
    before: service({ ports: [port({ protocol: "SCTP", port: 9, internalEndpoints: [A, B] })] }),
    after: service({ ports: [port({ protocol: "SCTP", port: 9, internalEndpoints: [B] })] }),
    gone: ["SCTP 203.0.113.10:9 -> 198.51.100.2:5353"],
  },
  {
    rule: "each family is its own: an endpoint's flows entered at the addresses of its family",
    before: dns([A, ep("2001:db8:1::2", 5353)], {
      clusterIPs: ["203.0.113.10", "2001:db8:2::10"],
      externalIPs: ["192.0.2.9", "2001:db8:3::9"],
    }),
    after: dns([], {
      clusterIPs: ["203.0.113.10", "2001:db8:2::10"],
      externalIPs: ["192.0.2.9", "2001:db8:3::9"],
    }),
    gone: [
      "UDP 203.0.113.10:53 -> 198.51.100.2:5353",
      "UDP 192.0.2.9:53 -> 198.51.100.2:5353",
      "UDP [2001:db8:2::10]:53 -> 2001:db8:1::2:5353",
      "UDP [2001:db8:3::9]:53 -> 2001:db8:1::2:5353",
    ],
  },
  {
    rule: "an endpoint of a family the Service has no cluster IP in: no flow entered for it",
    before: dns([ep("2001:db8:1::2", 5353)]),
    after: dns([]),
    gone: [],
  },
];

describe("goneEndpoints (kube-proxy's conntrack cleanup rules)", () => {
  for (const r of rows) {
    test(r.rule, () => {
      assert.deepEqual(goneEndpoints(r.before, r.after).map(show), r.gone);
    });
  }

  test("the pairs carry the endpoint's family", () => {
    const [v6] = goneEndpoints(
      dns([ep("2001:db8:1::2", 5353)], { clusterIPs: ["2001:db8:2::10"] }),
      undefined,
    );
    assert.equal(v6?.family, "IPv6");
  });
});
