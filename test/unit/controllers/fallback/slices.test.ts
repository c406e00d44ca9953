import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Pod } from "../../../../src/controllers/fallback/pod.ts";
import {
  buildFallbackSlices,
  type FallbackSliceSpec,
  MAX_ENDPOINTS_PER_SLICE,
  toApiObject,
} from "../../../../src/controllers/fallback/slices.ts";
import type { Service } from "../../../../src/model/kube.ts";
import { dualStack, svc } from "../../brain/fixtures.ts";
import { pod } from "./fixtures.ts";

const ZONES: Record<string, string> = { n1: "z1", n2: "z2" };

function build(service: Service, pods: readonly Pod[], active = true): FallbackSliceSpec[] {
  return buildFallbackSlices({ service, pods, zoneOf: (n) => ZONES[n] ?? "", active });
}

/** "family ports: ip(ready,serving,terminating)..." per slice: what a row is about. */
function summary(slices: readonly FallbackSliceSpec[]): string[] {
  return slices
    .map((s) => {
      const ports = s.ports.map((p) => `${p.name}=${p.port}`).join(",");
      const eps = s.endpoints.map((e) => {
        const c = e.conditions;
        return `${e.addresses[0]}(${+c.ready}${+c.serving}${+c.terminating})`;
      });
      return `${s.addressType} [${ports}] ${eps.join(" ")}`;
    })
    .sort();
}

const NAMED = svc({ ports: [{ name: "http", targetPort: "http" }] });
const TWO_PORTS = svc({
  ports: [
    { name: "http", targetPort: "http" },
    { name: "metrics", port: 9100, targetPort: 9100 },
  ],
});

interface Row {
  readonly name: string;
  readonly service: Service;
  readonly pods: readonly Pod[];
  readonly active?: boolean;
  readonly expect: readonly string[];
}

const rows: Row[] = [
  { name: "no pods: no slices", service: NAMED, pods: [], expect: [] },
  {
    name: "active: a ready pod is serving and terminating, not ready (a stock kube-proxy uses it only while no endpoint is ready)",
    service: NAMED,
    pods: [pod("a", "203.0.113.1")],
    expect: ["IPv4 [http=8080] 203.0.113.1(011)"],
  },
  {
    name: "active: a pod not ready is neither ready nor serving",
    service: NAMED,
    pods: [pod("a", "203.0.113.1", { ready: false })],
    expect: ["IPv4 [http=8080] 203.0.113.1(001)"],
  },
  {
    name: "active: a deleted pod still ready takes no new connection: not serving",
    service: NAMED,
    pods: [pod("a", "203.0.113.1", { terminating: true })],
    expect: ["IPv4 [http=8080] 203.0.113.1(001)"],
  },
  {
    name: "inactive: the same endpoints, never ready nor serving (a stock kube-proxy sends nothing)",
    service: NAMED,
    pods: [pod("a", "203.0.113.1"), pod("b", "203.0.113.2", { terminating: true })],
    active: false,
    expect: ["IPv4 [http=8080] 203.0.113.1(000) 203.0.113.2(001)"],
  },
  {
    name: "pods whose named port differs go to different slices",
    service: NAMED,
    pods: [
      pod("a", "203.0.113.1"),
      pod("b", "203.0.113.2", { ports: [{ name: "http", containerPort: 9090, protocol: "TCP" }] }),
    ],
    expect: ["IPv4 [http=8080] 203.0.113.1(011)", "IPv4 [http=9090] 203.0.113.2(011)"],
  },
  {
    name: "a pod without the named port serves the other ports only",
    service: TWO_PORTS,
    pods: [pod("a", "203.0.113.1"), pod("b", "203.0.113.2", { ports: [] })],
    expect: ["IPv4 [http=8080,metrics=9100] 203.0.113.1(011)", "IPv4 [metrics=9100] 203.0.113.2(011)"],
  },
  {
    name: "publishNotReadyAddresses: an active fallback pod serves whatever its readiness",
    service: svc({ ports: [{ name: "http", targetPort: "http" }], publishNotReadyAddresses: true }),
    pods: [pod("a", "203.0.113.1", { ready: false })],
    expect: ["IPv4 [http=8080] 203.0.113.1(011)"],
  },
  {
    name: "a sidecar's named port resolves a targetPort like a container's",
    service: svc({ ports: [{ name: "proxy", targetPort: "proxy" }] }),
    pods: [pod("a", "203.0.113.1", { ports: [{ name: "proxy", containerPort: 15001, protocol: "TCP" }] })],
    expect: ["IPv4 [proxy=15001] 203.0.113.1(011)"],
  },
  {
    name: "pods without an address or that finished are left out",
    service: NAMED,
    pods: [pod("a", "203.0.113.1", { ips: [] }), pod("b", "203.0.113.2", { finished: true })],
    expect: [],
  },
  {
    name: "dual-stack Service: one slice per family",
    service: dualStack({ ports: [{ name: "http", targetPort: "http" }] }),
    pods: [pod("a", "203.0.113.1", { ips: ["203.0.113.1", "2001:db8::1"] })],
    expect: ["IPv4 [http=8080] 203.0.113.1(011)", "IPv6 [http=8080] 2001:db8::1(011)"],
  },
  {
    name: "single-stack IPv4 Service: a pod's IPv6 address is not published",
    service: NAMED,
    pods: [pod("a", "203.0.113.1", { ips: ["2001:db8::1", "203.0.113.1"] })],
    expect: ["IPv4 [http=8080] 203.0.113.1(011)"],
  },
];

describe("fallback slice building", () => {
  for (const row of rows)
    test(row.name, () => assert.deepEqual(summary(build(row.service, row.pods, row.active)), row.expect));

  test(`at most ${MAX_ENDPOINTS_PER_SLICE} endpoints per slice`, () => {
    const pods = Array.from({ length: 250 }, (_, i) =>
      pod(`p${String(i).padStart(3, "0")}`, `10.0.${i >> 8}.${i & 255}`),
    );
    const slices = build(NAMED, pods);
    assert.deepEqual(slices.map((s) => s.endpoints.length).sort(), [100, 100, 50]);
    assert.equal(new Set(slices.map((s) => s.name)).size, 3);
  });

  test("names are stable across builds and independent of pod order", () => {
    const pods = [pod("a", "203.0.113.1"), pod("b", "203.0.113.2")];
    assert.deepEqual(build(NAMED, pods), build(NAMED, [...pods].reverse()));
  });

  test("labels (the Service's, then ours), nodeName, zone from the Node, targetRef, owner reference", () => {
    const labelled: Service = {
      ...NAMED,
      metadata: { ...NAMED.metadata, labels: { team: "shop", "kubernetes.io/service-name": "spoofed" } },
    };
    const [spec] = build(labelled, [pod("a", "203.0.113.1", { node: "n2" })], false);
    assert.ok(spec);
    assert.deepEqual(spec.labels, {
      team: "shop",
      "kubernetes.io/service-name": "web",
      "endpointslice.kubernetes.io/managed-by": "fallback.kpng.io",
      "fallback.kpng.io/active": "false",
    });
    assert.deepEqual(spec.endpoints[0], {
      addresses: ["203.0.113.1"],
      conditions: { ready: false, serving: false, terminating: false },
      nodeName: "n2",
      zone: "z2",
      targetRef: { kind: "Pod", namespace: "ns", name: "a", uid: "uid-a" },
    });
    const api = toApiObject(spec, NAMED) as { metadata: { ownerReferences: unknown[]; namespace: string } };
    assert.equal(api.metadata.namespace, "ns");
    assert.deepEqual(api.metadata.ownerReferences, [
      {
        apiVersion: "v1",
        kind: "Service",
        name: "web",
        uid: "uid-web",
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
  });
});
