import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { categorizeEndpoints, type PortPolicy } from "../../../src/brain/categorize.ts";
import type { EndpointInfo } from "../../../src/brain/endpoint-merge.ts";
import { sameLocalService } from "../../../src/brain/local-equal.ts";
import { topologyModeFromHints } from "../../../src/brain/topology.ts";
import { endpointString, type LocalService, withFamilyEndpoints } from "../../../src/model/local.ts";

function info(ip: string, over: Partial<EndpointInfo> = {}): EndpointInfo {
  return {
    ip,
    port: 80,
    nodeName: "n2",
    ready: true,
    serving: true,
    terminating: false,
    zoneHints: [],
    nodeHints: [],
    ...over,
  };
}
const term = (ip: string, over: Partial<EndpointInfo> = {}) =>
  info(ip, { ready: false, terminating: true, ...over });

const CLUSTER: PortPolicy = { usesCluster: true, usesLocal: false };
const LOCAL_ONLY: PortPolicy = { usesCluster: false, usesLocal: true };
const BOTH: PortPolicy = { usesCluster: true, usesLocal: true };

interface Row {
  readonly name: string;
  readonly endpoints: EndpointInfo[];
  readonly policy: PortPolicy;
  readonly zone?: string;
  readonly cluster: string[];
  readonly local: string[];
  readonly hasAny: boolean;
}

const rows: Row[] = [
  {
    name: "cluster: ready endpoints only",
    endpoints: [info("192.0.2.1"), term("192.0.2.2")],
    policy: CLUSTER,
    cluster: ["192.0.2.1:80"],
    local: [],
    hasAny: true,
  },
  {
    name: "cluster: no endpoints means hasAny false",
    endpoints: [],
    policy: CLUSTER,
    cluster: [],
    local: [],
    hasAny: false,
  },
  {
    name: "cluster: fallback to serving+terminating",
    endpoints: [term("192.0.2.1"), term("192.0.2.2", { serving: false })],
    policy: CLUSTER,
    cluster: ["192.0.2.1:80"],
    local: [],
    hasAny: true,
  },
  {
    name: "local-only policy computes no cluster endpoints",
    endpoints: [info("192.0.2.1"), info("192.0.2.2", { nodeName: "n1" })],
    policy: LOCAL_ONLY,
    cluster: [],
    local: ["192.0.2.2:80"],
    hasAny: true,
  },
  {
    name: "local-only with only remote ready endpoints: no local, hasAny true",
    endpoints: [info("192.0.2.1")],
    policy: LOCAL_ONLY,
    cluster: [],
    local: [],
    hasAny: true,
  },
  {
    name: "local-only with only remote serving+terminating endpoints: hasAny true",
    endpoints: [term("192.0.2.1")],
    policy: LOCAL_ONLY,
    cluster: [],
    local: [],
    hasAny: true,
  },
  {
    name: "local-only with unready non-serving endpoints: hasAny false",
    endpoints: [info("192.0.2.1", { ready: false, serving: false })],
    policy: LOCAL_ONLY,
    cluster: [],
    local: [],
    hasAny: false,
  },
  {
    name: "both: local ready chosen, cluster keeps every ready",
    endpoints: [
      info("192.0.2.1"),
      info("192.0.2.2", { nodeName: "n1" }),
      term("192.0.2.3", { nodeName: "n1" }),
    ],
    policy: BOTH,
    cluster: ["192.0.2.1:80", "192.0.2.2:80"],
    local: ["192.0.2.2:80"],
    hasAny: true,
  },
  {
    name: "both: local terminating used when no local ready, cluster ready elsewhere",
    endpoints: [info("192.0.2.1"), term("192.0.2.3", { nodeName: "n1" })],
    policy: BOTH,
    cluster: ["192.0.2.1:80"],
    local: ["192.0.2.3:80"],
    hasAny: true,
  },
  {
    name: "both: zone topology applies to cluster but not to local",
    endpoints: [
      info("192.0.2.1", { zoneHints: ["z1"] }),
      info("192.0.2.2", { nodeName: "n1", zoneHints: ["z2"] }),
    ],
    policy: BOTH,
    cluster: ["192.0.2.1:80"],
    local: ["192.0.2.2:80"],
    hasAny: true,
  },
];

describe("categorizeEndpoints", () => {
  for (const row of rows) {
    test(row.name, () => {
      const r = categorizeEndpoints(row.endpoints, row.policy, "n1", row.zone ?? "z1");
      assert.deepEqual(r.clusterEndpoints.map(endpointString), row.cluster);
      assert.deepEqual(r.localEndpoints.map(endpointString), row.local);
      assert.equal(r.hasAnyEndpoints, row.hasAny);
    });
  }
});

describe("topologyModeFromHints", () => {
  const rowsT: { name: string; endpoints: EndpointInfo[]; zone: string; mode: string }[] = [
    { name: "no hints: None", endpoints: [info("192.0.2.1")], zone: "z1", mode: "None" },
    {
      name: "every ready endpoint zone-hinted, one for this zone: PreferSameZone",
      endpoints: [info("192.0.2.1", { zoneHints: ["z1"] }), info("192.0.2.2", { zoneHints: ["z2"] })],
      zone: "z1",
      mode: "PreferSameZone",
    },
    {
      name: "not-ready endpoints without hints are not considered",
      endpoints: [info("192.0.2.1", { zoneHints: ["z1"] }), info("192.0.2.2", { ready: false })],
      zone: "z1",
      mode: "PreferSameZone",
    },
    {
      name: "empty zone never matches",
      endpoints: [info("192.0.2.1", { zoneHints: ["z1"] })],
      zone: "",
      mode: "None",
    },
    {
      name: "every ready endpoint node-hinted, one for this node: PreferSameNode",
      endpoints: [info("192.0.2.1", { nodeHints: ["n1"] }), info("192.0.2.2", { nodeHints: ["n2"] })],
      zone: "z1",
      mode: "PreferSameNode",
    },
    {
      name: "no ready endpoints: None",
      endpoints: [term("192.0.2.1", { zoneHints: ["z1"] })],
      zone: "z1",
      mode: "None",
    },
  ];
  for (const row of rowsT)
    test(row.name, () => assert.equal(topologyModeFromHints(row.endpoints, "n1", row.zone), row.mode));
});

describe("sameLocalService", () => {
  const base: LocalService = {
    namespace: "ns",
    name: "web",
    type: "ClusterIP",
    families: [
      { family: "IPv4", clusterIP: "198.51.100.10", externalIPs: [], loadBalancerIPs: [], sourceRanges: [] },
    ],
    sessionAffinitySeconds: 0,
    internalTrafficPolicy: "Cluster",
    externalTrafficPolicy: "Cluster",
    healthCheckNodePort: 0,
    localReadyEndpoints: 0,
    ports: [
      withFamilyEndpoints({
        name: "http",
        protocol: "TCP",
        port: 80,
        nodePort: 0,
        hasEndpoints: true,
        endpointFamilies: ["IPv4"],
        internalEndpoints: [
          { ip: "203.0.113.1", port: 8080, local: false, ready: true, serving: true, terminating: false },
        ],
        externalEndpoints: [],
      }),
    ],
  };
  test("a structural copy is the same", () =>
    assert.equal(sameLocalService(base, structuredClone(base)), true));
  // Every field, changed alone, must make a difference: guards the hand-written comparison.
  const changes: Record<string, unknown> = {
    namespace: "x",
    name: "x",
    type: "NodePort",
    families: [],
    sessionAffinitySeconds: 5,
    internalTrafficPolicy: "Local",
    externalTrafficPolicy: "Local",
    healthCheckNodePort: 1,
    localReadyEndpoints: 1,
  };
  const port = base.ports[0]!;
  const portChanges: Record<string, unknown> = {
    name: "x",
    protocol: "UDP",
    port: 81,
    nodePort: 30000,
    hasEndpoints: false,
    endpointFamilies: [],
    internalEndpoints: [],
    externalEndpoints: port.internalEndpoints,
  };
  const endpointChanges: Record<string, unknown> = {
    ip: "203.0.113.2",
    port: 1,
    local: true,
    ready: false,
    serving: false,
    terminating: true,
  };
  test("every service field is compared", () => {
    assert.deepEqual(
      Object.keys(changes).sort(),
      Object.keys(base)
        .filter((k) => k !== "ports")
        .sort(),
    );
    for (const [k, v] of Object.entries(changes))
      assert.equal(sameLocalService(base, { ...base, [k]: v }), false, k);
  });
  test("every port field is compared", () => {
    // The IPv4 counts follow from the two lists: comparing those compares them.
    assert.deepEqual(
      Object.keys(portChanges).sort(),
      Object.keys(port)
        .filter((k) => !k.endsWith("IPv4Count"))
        .sort(),
    );
    for (const [k, v] of Object.entries(portChanges))
      assert.equal(sameLocalService(base, { ...base, ports: [{ ...port, [k]: v }] }), false, k);
  });
  test("every per-family address field is compared", () => {
    const f = base.families[0]!;
    const familyChanges: Record<string, unknown> = {
      family: "IPv6",
      clusterIP: "198.51.100.11",
      externalIPs: ["192.0.2.1"],
      loadBalancerIPs: ["192.0.2.2"],
      sourceRanges: ["192.0.2.0/24"],
    };
    assert.deepEqual(Object.keys(familyChanges).sort(), Object.keys(f).sort());
    for (const [k, v] of Object.entries(familyChanges))
      assert.equal(sameLocalService(base, { ...base, families: [{ ...f, [k]: v }] }), false, k);
  });
  test("every endpoint field is compared", () => {
    const e = port.internalEndpoints[0]!;
    assert.deepEqual(Object.keys(endpointChanges).sort(), Object.keys(e).sort());
    for (const [k, v] of Object.entries(endpointChanges)) {
      assert.equal(
        sameLocalService(base, {
          ...base,
          ports: [withFamilyEndpoints({ ...port, internalEndpoints: [{ ...e, [k]: v }] })],
        }),
        false,
        k,
      );
    }
  });
});
