import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { LocalService } from "../../../src/model/local.ts";
import { type CtFilter, filterLine, staleFilters } from "../../../src/node/conntrack/stale.ts";
import type { LocalServiceOverrides } from "../../support/local-service.ts";
import { ep, port, service, state } from "../backends/nft/fixtures.ts";

const udp = (over: Parameters<typeof port>[0] = {}) =>
  port({ name: "dns", protocol: "UDP", port: 53, ...over });
const dns = (eps: string[], over: LocalServiceOverrides = {}, nodePort = 0) =>
  service({
    name: "dns",
    ports: [
      udp({
        internalEndpoints: eps.map((ip) => ep(ip)),
        externalEndpoints: eps.map((ip) => ep(ip)),
        nodePort,
      }),
    ],
    ...over,
  });

/** The filter for entries to dns's cluster IP DNATed to an endpoint that left. */
const leftClusterIP = (replySrc: string): CtFilter => ({
  family: "IPv4",
  protocol: "udp",
  origDst: "203.0.113.10",
  origDstPort: 53,
  replySrc,
});

const cases: { name: string; before: LocalService[] | undefined; after: LocalService[]; want: CtFilter[] }[] =
  [
    { name: "nothing changed", before: [dns(["198.51.100.2"])], after: [dns(["198.51.100.2"])], want: [] },
    {
      name: "an endpoint left the cluster IP",
      before: [dns(["198.51.100.2", "198.51.100.3"])],
      after: [dns(["198.51.100.3"])],
      want: [leftClusterIP("198.51.100.2")],
    },
    {
      name: "an endpoint left a service with a node port, an external IP and an LB IP",
      before: [
        dns(
          ["198.51.100.2", "198.51.100.3"],
          { externalIPs: ["192.0.2.9"], loadBalancerIPs: ["192.0.2.10"] },
          30053,
        ),
      ],
      after: [dns(["198.51.100.3"], { externalIPs: ["192.0.2.9"], loadBalancerIPs: ["192.0.2.10"] }, 30053)],
      want: [
        leftClusterIP("198.51.100.2"),
        { family: "IPv4", protocol: "udp", origDst: "192.0.2.9", origDstPort: 53, replySrc: "198.51.100.2" },
        { family: "IPv4", protocol: "udp", origDst: "192.0.2.10", origDstPort: 53, replySrc: "198.51.100.2" },
        { family: "IPv4", protocol: "udp", origDstPort: 30053, replySrc: "198.51.100.2" },
      ],
    },
    {
      name: "a service without endpoints gains one",
      before: [dns([])],
      after: [dns(["198.51.100.2"])],
      want: [{ family: "IPv4", protocol: "udp", origDst: "203.0.113.10", origDstPort: 53 }],
    },
    {
      name: "a new service with endpoints (its IP may have had dropped flows)",
      before: [],
      after: [dns(["198.51.100.2"], {}, 30053)],
      want: [
        { family: "IPv4", protocol: "udp", origDst: "203.0.113.10", origDstPort: 53 },
        { family: "IPv4", protocol: "udp", origDstPort: 30053 },
      ],
    },
    {
      name: "a deleted service: every endpoint left",
      before: [dns(["198.51.100.2"])],
      after: [],
      want: [leftClusterIP("198.51.100.2")],
    },
    {
      name: "the target port changed: entries DNATed to the old one are stale",
      before: [dns(["198.51.100.2"])],
      after: [
        service({
          name: "dns",
          ports: [
            udp({
              internalEndpoints: [ep("198.51.100.2", 5353)],
              externalEndpoints: [ep("198.51.100.2", 5353)],
            }),
          ],
        }),
      ],
      want: [leftClusterIP("198.51.100.2")],
    },
    {
      name: "TCP needs nothing",
      before: [service({ ports: [port()] })],
      after: [
        service({
          ports: [port({ internalEndpoints: [ep("198.51.100.3")], externalEndpoints: [] })],
        }),
      ],
      want: [],
    },
    {
      name: "SCTP is cleaned as UDP",
      before: [service({ ports: [port({ protocol: "SCTP", port: 9 })] })],
      after: [
        service({
          ports: [
            port({
              protocol: "SCTP",
              port: 9,
              internalEndpoints: [ep("198.51.100.3")],
              externalEndpoints: [ep("198.51.100.3")],
            }),
          ],
        }),
      ],
      want: [
        {
          family: "IPv4",
          protocol: "sctp",
          origDst: "203.0.113.10",
          origDstPort: 9,
          replySrc: "198.51.100.2",
        },
      ],
    },
    {
      name: "IPv6",
      before: [dns(["2001:db8:1::2", "2001:db8:1::3"], { clusterIPs: ["2001:db8:2::10"] })],
      after: [dns(["2001:db8:1::3"], { clusterIPs: ["2001:db8:2::10"] })],
      want: [
        {
          family: "IPv6",
          protocol: "udp",
          origDst: "2001:db8:2::10",
          origDstPort: 53,
          replySrc: "2001:db8:1::2",
        },
      ],
    },
  ];

describe("staleFilters", () => {
  for (const c of cases) {
    test(c.name, () => {
      const got = staleFilters(c.before && state(c.before), state(c.after, 2));
      assert.deepEqual(got, c.want);
    });
  }

  test("an unchanged object is skipped without looking inside (identity)", () => {
    const s = dns(["198.51.100.2"]);
    assert.deepEqual(staleFilters(state([s]), state([s], 2)), []);
  });
});

describe("filterLine", () => {
  test("renders conntrack -D arguments, leaving out what matches anything", () => {
    assert.equal(
      filterLine({
        family: "IPv4",
        protocol: "udp",
        origDst: "203.0.113.10",
        origDstPort: 53,
        replySrc: "198.51.100.2",
      }),
      "-D -f ipv4 -p udp --orig-dst 203.0.113.10 --dport 53 --reply-src 198.51.100.2",
    );
    assert.equal(
      filterLine({ family: "IPv6", protocol: "sctp", origDstPort: 30053 }),
      "-D -f ipv6 -p sctp --dport 30053",
    );
  });
});
