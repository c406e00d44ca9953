import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  type LocalEndpoint,
  type LocalService,
  type LocalServicePort,
  type LocalState,
  splitServiceCIDRs,
  withFamilyEndpoints,
} from "../../../../src/model/local.ts";
import { localStateToJson } from "../../../../src/sinks/json/local-state-json.ts";
import { localStateText } from "../../../../src/sinks/json/local-state-text.ts";
import { jsonDocument } from "../../../../src/sinks/json/write.ts";
import { familiesOf } from "../../../support/local-service.ts";

const ep = (ip: string, port: number): LocalEndpoint => ({
  ip,
  port,
  local: false,
  ready: true,
  serving: true,
  terminating: false,
});

function service(i: number, shape: number): LocalService {
  const ports: LocalServicePort[] = Array.from({ length: shape % 3 }, (_, p) =>
    withFamilyEndpoints({
      name: p === 0 ? "" : `p-"${p}"`,
      protocol: p % 2 === 0 ? "TCP" : "UDP",
      port: 80 + p,
      nodePort: shape % 5 === 0 ? 30000 + p : 0,
      hasEndpoints: shape % 4 !== 0,
      endpointFamilies: shape % 4 === 0 ? [] : shape % 2 === 0 ? ["IPv4", "IPv6"] : ["IPv4"],
      internalEndpoints: Array.from({ length: shape % 4 }, (_, e) => ep(`10.0.${i % 250}.${e}`, 8080)),
      externalEndpoints: shape % 2 === 0 ? [ep("2001:db8::1", 8080)] : [],
    }),
  );
  return {
    namespace: `ns-${i % 7}`,
    name: i % 11 === 0 ? `svc-\u00e9\\${i}` : `svc-${i}`,
    type: shape % 3 === 0 ? "NodePort" : "ClusterIP",
    families: familiesOf({
      clusterIPs: shape % 2 === 0 ? [`172.30.0.${i % 250}`, "fd00::1"] : [`172.30.0.${i % 250}`],
      externalIPs: shape % 6 === 0 ? ["192.0.2.1"] : [],
      sourceRanges: shape % 7 === 0 ? ["192.0.2.0/24", "2001:db8::/64"] : [],
    }),
    sessionAffinitySeconds: shape % 5 === 0 ? 10800 : 0,
    internalTrafficPolicy: "Cluster",
    externalTrafficPolicy: shape % 2 === 0 ? "Local" : "Cluster",
    healthCheckNodePort: 0,
    localReadyEndpoints: shape % 3,
    ...(shape % 2 === 0 ? { endpointsChangedAt: 1 } : {}),
    ports,
  };
}

const state = (count: number, serviceCIDRs: string[] = []): LocalState => {
  const services = new Map<string, LocalService>();
  for (let i = 0; i < count; i++) {
    const s = service(i, (i * 7) % 13);
    services.set(`${s.namespace}/${s.name}`, s);
  }
  return { node: 'node-"1"', revision: 3, services, serviceCIDRs: splitServiceCIDRs(serviceCIDRs) };
};

describe("localStateText: the local state document in pieces", () => {
  const rows: [string, LocalState][] = [
    ["an empty state", state(0)],
    ["an empty state with ranges", state(0, ["10.96.0.0/12", "fd00::/108"])],
    ["one service", state(1)],
    ["services of every shape, escapes, both families", state(40, ["10.96.0.0/12"])],
    ["more services than one piece holds", state(2500)],
  ];
  for (const [rule, s] of rows) {
    test(`${rule}: the same text as JSON.stringify of the document`, () => {
      assert.equal([...localStateText(s)].join(""), jsonDocument(localStateToJson(s)));
    });
  }

  test("a large state comes in several pieces", () => {
    assert.ok([...localStateText(state(2500))].length >= 3);
  });

  test("pieces stay below V8's large-object size (128 KiB), which maps fresh memory for each", () => {
    const pieces = [...localStateText(state(20_000))];
    const longest = Math.max(...pieces.map((p) => p.length));
    assert.ok(longest < 128 * 1024, `a piece of ${longest} characters`);
  });

  test("a service larger than a piece is a piece of its own, whole", () => {
    const big = service(1, 1);
    const port = big.ports[0] as LocalServicePort;
    const endpoints = Array.from({ length: 3000 }, (_, e) => ep(`10.1.${e >> 8}.${e & 255}`, 8080));
    const small = state(300);
    const s: LocalState = {
      ...small,
      services: new Map([
        ...small.services,
        [
          "ns-1/big",
          {
            ...big,
            name: "big",
            ports: [withFamilyEndpoints({ ...port, internalEndpoints: endpoints, externalEndpoints: [] })],
          },
        ],
      ]),
    };
    const pieces = [...localStateText(s)];
    assert.equal(pieces.join(""), jsonDocument(localStateToJson(s)));
    assert.ok(pieces.some((p) => p.includes('"name": "big"') && p.length > 128 * 1024));
  });
});
