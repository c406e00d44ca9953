// `kpng explain`'s reasons, one row per rule of the Kubernetes docs. Every row also checks that
// the endpoints marked used are exactly those the brain programs (computeLocalService).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  type AddressQuery,
  explainService,
  narrowToAddress,
  parseAddressQuery,
  type ReasonCode,
  type ServiceExplanation,
  type TrafficKind,
  type Verdict,
} from "../../../src/brain/explain.ts";
import { computeLocalService } from "../../../src/brain/local-service.ts";
import type { EndpointSlice, Node, Service } from "../../../src/model/kube.ts";
import { endpointString } from "../../../src/model/local.ts";
import { dualStack, ep, node, slice, svc, terminating } from "./fixtures.ts";

const N1: Node = node("n1", { "topology.kubernetes.io/zone": "z1" });
const FALLBACK = { "endpointslice.kubernetes.io/managed-by": "fallback.kpng.io" };

interface Row {
  readonly docs: string;
  readonly service: Service;
  readonly slices: readonly EndpointSlice[];
  readonly served?: readonly string[];
  readonly kind?: TrafficKind;
  /** "ip:port" → reason code, for every endpoint listed under the kind. */
  readonly expect: Readonly<Record<string, ReasonCode>>;
  readonly used: readonly string[];
  readonly verdict: Verdict;
}

const rows: Row[] = [
  {
    docs: "A ready endpoint receives traffic",
    service: svc(),
    slices: [slice([ep("192.0.2.1")])],
    expect: { "192.0.2.1:8080": "ready" },
    used: ["192.0.2.1:8080"],
    verdict: "balance",
  },
  {
    docs: "An endpoint that is neither ready nor serving receives no traffic; with none left the Service rejects",
    service: svc(),
    slices: [slice([ep("192.0.2.1", { ready: false, serving: false })])],
    expect: { "192.0.2.1:8080": "not-serving" },
    used: [],
    verdict: "reject",
  },
  {
    docs: "A serving, not ready endpoint that is not terminating is not used",
    service: svc(),
    slices: [slice([ep("192.0.2.1", { ready: false }), ep("192.0.2.2")])],
    expect: { "192.0.2.1:8080": "not-ready", "192.0.2.2:8080": "ready" },
    used: ["192.0.2.2:8080"],
    verdict: "balance",
  },
  {
    docs: "Terminating endpoints that still serve are used when no endpoint is ready (KEP-1669)",
    service: svc(),
    slices: [slice([terminating("192.0.2.1"), terminating("192.0.2.2", { serving: false })])],
    expect: { "192.0.2.1:8080": "serving-terminating-fallback", "192.0.2.2:8080": "not-serving" },
    used: ["192.0.2.1:8080"],
    verdict: "balance",
  },
  {
    docs: "Terminating endpoints are not used while a ready endpoint exists",
    service: svc(),
    slices: [slice([terminating("192.0.2.1"), ep("192.0.2.2")])],
    expect: { "192.0.2.1:8080": "terminating-while-others-ready", "192.0.2.2:8080": "ready" },
    used: ["192.0.2.2:8080"],
    verdict: "balance",
  },
  {
    docs: "internalTrafficPolicy: Local routes cluster-IP traffic only to endpoints on the same node",
    service: svc({ internalTrafficPolicy: "Local" }),
    slices: [slice([ep("192.0.2.1", { node: "n1" }), ep("192.0.2.2", { node: "n2" })])],
    expect: { "192.0.2.1:8080": "ready", "192.0.2.2:8080": "other-node-local-policy" },
    used: ["192.0.2.1:8080"],
    verdict: "balance",
  },
  {
    docs: "internalTrafficPolicy: Local with no endpoint on the node drops the traffic",
    service: svc({ internalTrafficPolicy: "Local" }),
    slices: [slice([ep("192.0.2.2", { node: "n2" })])],
    expect: { "192.0.2.2:8080": "other-node-local-policy" },
    used: [],
    verdict: "drop",
  },
  {
    docs: "externalTrafficPolicy: Local sends node-port traffic only to the node's own endpoints",
    service: svc({ type: "NodePort", externalTrafficPolicy: "Local", ports: [{ nodePort: 30080 }] }),
    kind: "node-port",
    slices: [slice([ep("192.0.2.1", { node: "n1" }), ep("192.0.2.2")])],
    expect: { "192.0.2.1:8080": "ready", "192.0.2.2:8080": "other-node-local-policy" },
    used: ["192.0.2.1:8080"],
    verdict: "balance",
  },
  {
    docs: "externalTrafficPolicy: Local does not restrict cluster-IP traffic",
    service: svc({ type: "NodePort", externalTrafficPolicy: "Local", ports: [{ nodePort: 30080 }] }),
    kind: "cluster-ip",
    slices: [slice([ep("192.0.2.1", { node: "n1" }), ep("192.0.2.2")])],
    expect: { "192.0.2.1:8080": "ready", "192.0.2.2:8080": "ready" },
    used: ["192.0.2.1:8080", "192.0.2.2:8080"],
    verdict: "balance",
  },
  {
    docs: "externalTrafficPolicy: Local on a load balancer with no local endpoint drops",
    service: svc({
      type: "LoadBalancer",
      externalTrafficPolicy: "Local",
      ports: [{ nodePort: 30080 }],
      loadBalancerIngress: [{ ip: "203.0.113.7", hostname: "", ipMode: undefined }],
    }),
    kind: "load-balancer",
    slices: [slice([ep("192.0.2.2")])],
    expect: { "192.0.2.2:8080": "other-node-local-policy" },
    used: [],
    verdict: "drop",
  },
  {
    docs: "External IPs are balanced like the cluster IP under externalTrafficPolicy: Cluster",
    service: svc({ externalIPs: ["203.0.113.9"] }),
    kind: "external-ip",
    slices: [slice([ep("192.0.2.2")])],
    expect: { "192.0.2.2:8080": "ready" },
    used: ["192.0.2.2:8080"],
    verdict: "balance",
  },
  {
    docs: "Topology-aware routing: a zone hint for another zone keeps this zone's traffic away",
    service: svc(),
    slices: [slice([ep("192.0.2.1", { zoneHints: ["z1"] }), ep("192.0.2.2", { zoneHints: ["z2"] })])],
    expect: { "192.0.2.1:8080": "ready", "192.0.2.2:8080": "topology-other-zone" },
    used: ["192.0.2.1:8080"],
    verdict: "balance",
  },
  {
    docs: "Topology hints are ignored when no endpoint is hinted for this zone",
    service: svc(),
    slices: [slice([ep("192.0.2.1", { zoneHints: ["z3"] }), ep("192.0.2.2", { zoneHints: ["z2"] })])],
    expect: { "192.0.2.1:8080": "ready", "192.0.2.2:8080": "ready" },
    used: ["192.0.2.1:8080", "192.0.2.2:8080"],
    verdict: "balance",
  },
  {
    docs: "trafficDistribution PreferSameNode: a node hint for another node",
    service: svc(),
    slices: [
      slice([
        ep("192.0.2.1", { node: "n1", nodeHints: ["n1"], zoneHints: ["z1"] }),
        ep("192.0.2.2", { nodeHints: ["n2"], zoneHints: ["z1"] }),
      ]),
    ],
    expect: { "192.0.2.1:8080": "ready", "192.0.2.2:8080": "topology-other-node" },
    used: ["192.0.2.1:8080"],
    verdict: "balance",
  },
  {
    docs: "Fallback selector active: the Service's own EndpointSlices are set aside",
    service: svc(),
    slices: [
      slice([ep("192.0.2.1", { ready: false, serving: false })], { name: "web-own" }),
      slice([ep("192.0.2.9")], {
        name: "web-fallback",
        labels: { "kubernetes.io/service-name": "web", ...FALLBACK, "fallback.kpng.io/active": "true" },
      }),
    ],
    expect: { "192.0.2.9:8080": "ready", "192.0.2.1:8080": "fallback-active" },
    used: ["192.0.2.9:8080"],
    verdict: "balance",
  },
  {
    docs: "Fallback slices that are not active are not used",
    service: svc(),
    slices: [
      slice([ep("192.0.2.1")], { name: "web-own" }),
      slice([ep("192.0.2.9")], {
        name: "web-fallback",
        labels: { "kubernetes.io/service-name": "web", ...FALLBACK, "fallback.kpng.io/active": "false" },
      }),
    ],
    expect: { "192.0.2.1:8080": "ready", "192.0.2.9:8080": "fallback-inactive" },
    used: ["192.0.2.1:8080"],
    verdict: "balance",
  },
  {
    docs: "A Service labelled service.kubernetes.io/service-proxy-name is left to that proxy",
    service: svc({ labels: { "service.kubernetes.io/service-proxy-name": "other" } }),
    slices: [slice([ep("192.0.2.1")])],
    expect: { "192.0.2.1:8080": "proxy-name-not-served" },
    used: [],
    verdict: "none",
  },
  {
    docs: "A proxy serving only a proxy name leaves unlabelled Services alone",
    service: svc(),
    served: ["legacy"],
    slices: [slice([ep("192.0.2.1")])],
    expect: { "192.0.2.1:8080": "proxy-name-not-served" },
    used: [],
    verdict: "none",
  },
  {
    docs: "A proxy serving several names serves a Service labelled with any of them",
    service: svc({ labels: { "service.kubernetes.io/service-proxy-name": "legacy" } }),
    served: ["", "legacy"],
    slices: [slice([ep("192.0.2.1")])],
    expect: { "192.0.2.1:8080": "ready" },
    used: ["192.0.2.1:8080"],
    verdict: "balance",
  },
  {
    docs: "Headless Services (clusterIP: None) get no virtual IP and are not proxied",
    service: svc({ clusterIP: "None", clusterIPs: ["None"] }),
    slices: [slice([ep("192.0.2.1")])],
    expect: { "192.0.2.1:8080": "headless" },
    used: [],
    verdict: "none",
  },
  {
    docs: "ExternalName Services are a DNS alias and are not proxied",
    service: svc({ type: "ExternalName", clusterIP: "", clusterIPs: [] }),
    slices: [],
    expect: {},
    used: [],
    verdict: "none",
  },
  {
    docs: "A single-stack IPv4 Service does not use IPv6 endpoints",
    service: svc(),
    slices: [slice([ep("192.0.2.1")]), slice([ep("2001:db8::1")], { addressType: "IPv6" })],
    expect: { "192.0.2.1:8080": "ready", "[2001:db8::1]:8080": "no-address-of-family" },
    used: ["192.0.2.1:8080"],
    verdict: "balance",
  },
  {
    docs: "A dual-stack Service uses the endpoints of both families",
    service: dualStack(),
    slices: [slice([ep("192.0.2.1")]), slice([ep("2001:db8::1")], { addressType: "IPv6" })],
    expect: { "192.0.2.1:8080": "ready", "[2001:db8::1]:8080": "ready" },
    used: ["192.0.2.1:8080", "[2001:db8::1]:8080"],
    verdict: "balance",
  },
  {
    docs: "External IPs of one family do not take the other family's endpoints",
    service: dualStack({ externalIPs: ["203.0.113.9"] }),
    kind: "external-ip",
    slices: [slice([ep("192.0.2.1")]), slice([ep("2001:db8::1")], { addressType: "IPv6" })],
    expect: { "192.0.2.1:8080": "ready", "[2001:db8::1]:8080": "no-address-of-family" },
    used: ["192.0.2.1:8080"],
    verdict: "balance",
  },
  {
    docs: "A Service without endpoints rejects (ICMP port unreachable)",
    service: svc(),
    slices: [],
    expect: {},
    used: [],
    verdict: "reject",
  },
];

function explainRow(row: Row): ServiceExplanation {
  return explainService({
    service: row.service,
    slices: row.slices,
    node: N1,
    nodeName: "n1",
    servedProxyNames: row.served ?? [""],
  });
}

describe("kpng explain: reasons in the terms of the Kubernetes docs", () => {
  for (const row of rows) {
    test(row.docs, () => {
      const x = explainRow(row);
      const kind = x.ports[0]?.kinds.find((k) => k.kind === (row.kind ?? "cluster-ip"));
      assert.ok(kind, `no ${row.kind ?? "cluster-ip"} traffic in ${JSON.stringify(x)}`);
      const codes = Object.fromEntries(kind.endpoints.map((e) => [endpointString(e), e.code]));
      assert.deepEqual(codes, row.expect);
      const used = kind.endpoints.filter((e) => e.used).map(endpointString);
      assert.deepEqual(used.sort(), [...row.used].sort());
      assert.equal(kind.verdict, row.verdict);
      for (const e of kind.endpoints) assert.ok(e.reason.length > 0);
      // Used is what the brain programs.
      if (!x.proxied) return;
      const local = computeLocalService(row.service, row.slices, { name: "n1", labels: N1.metadata.labels });
      const port = local?.ports[0];
      const programmed = kind.kind === "cluster-ip" ? port?.internalEndpoints : port?.externalEndpoints;
      assert.deepEqual((programmed ?? []).map(endpointString).sort(), used.sort());
    });
  }
});

describe("kpng explain: the Service as a whole", () => {
  test("ClientIP session affinity and its timeout are reported", () => {
    const x = explainService({
      service: svc({ sessionAffinity: "ClientIP", sessionAffinityTimeoutSeconds: 600 }),
      slices: [],
      node: N1,
      nodeName: "n1",
      servedProxyNames: [""],
    });
    assert.deepEqual(x.sessionAffinity, { type: "ClientIP", timeoutSeconds: 600 });
  });

  test("a node port is listed on the node's addresses", () => {
    const n: Node = { ...N1, addresses: [{ type: "InternalIP", address: "192.0.2.50" }] };
    const x = explainService({
      service: svc({ type: "NodePort", ports: [{ nodePort: 30080 }] }),
      slices: [],
      node: n,
      nodeName: "n1",
      servedProxyNames: [""],
    });
    assert.deepEqual(
      x.ports[0]?.kinds.map((k) => [k.kind, k.addresses]),
      [
        ["cluster-ip", ["198.51.100.10:80"]],
        ["node-port", ["192.0.2.50:30080"]],
      ],
    );
  });
});

describe("kpng explain IP:PORT[/PROTOCOL]", () => {
  const cases: [string, AddressQuery | undefined][] = [
    ["198.51.100.10:80", { ip: "198.51.100.10", port: 80, protocol: undefined }],
    ["198.51.100.10:53/udp", { ip: "198.51.100.10", port: 53, protocol: "UDP" }],
    ["[2001:db8::10]:443/TCP", { ip: "2001:db8::10", port: 443, protocol: "TCP" }],
    ["198.51.100.10", undefined],
    ["198.51.100.10:0", undefined],
    ["web:80", undefined],
  ];
  for (const [text, want] of cases) {
    test(`parses ${text}`, () => assert.deepEqual(parseAddressQuery(text), want));
  }

  test("keeps the kinds of traffic that arrive on the address", () => {
    const x = explainService({
      service: svc({ externalIPs: ["203.0.113.9"] }),
      slices: [],
      node: N1,
      nodeName: "n1",
      servedProxyNames: [""],
    });
    const q = parseAddressQuery("203.0.113.9:80/TCP");
    assert.ok(q);
    assert.deepEqual(
      narrowToAddress(x, q)?.ports[0]?.kinds.map((k) => k.kind),
      ["external-ip"],
    );
    const udp = parseAddressQuery("203.0.113.9:80/UDP");
    assert.ok(udp);
    assert.equal(narrowToAddress(x, udp), undefined);
  });
});
