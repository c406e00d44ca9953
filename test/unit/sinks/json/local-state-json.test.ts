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
import { type LocalServiceOverrides, localService } from "../../../support/local-service.ts";

const ep = (ip: string, port: number): LocalEndpoint => ({
  ip,
  port,
  local: false,
  ready: true,
  serving: true,
  terminating: false,
});

const port = (overrides: Partial<LocalServicePort> = {}): LocalServicePort =>
  withFamilyEndpoints({
    name: "http",
    protocol: "TCP",
    port: 80,
    nodePort: 0,
    hasEndpoints: true,
    endpointFamilies: ["IPv4"],
    internalEndpoints: [],
    externalEndpoints: [],
    ...overrides,
  });

const service = (namespace: string, name: string, overrides: LocalServiceOverrides = {}): LocalService =>
  localService({ namespace, name, ports: [port()], ...overrides });

const state = (...services: LocalService[]): LocalState => ({
  node: "node-1",
  revision: 7,
  services: new Map(services.map((s) => [`${s.namespace}/${s.name}`, s])),
  serviceCIDRs: { IPv4: [], IPv6: [] },
});

describe("localStateToJson", () => {
  test("the document carries the node and the revision", () => {
    const doc = localStateToJson(state());
    assert.deepEqual(doc, { node: "node-1", revision: 7, serviceCIDRs: [], services: [] });
  });

  test("the Service IP ranges are carried in the local state's order", () => {
    const doc = localStateToJson({
      ...state(),
      serviceCIDRs: splitServiceCIDRs(["198.51.100.0/24", "2001:db8:5::/112"]),
    });
    assert.deepEqual(doc.serviceCIDRs, ["198.51.100.0/24", "2001:db8:5::/112"]);
  });

  test("services are sorted by namespace, then name, whatever the map order", () => {
    const doc = localStateToJson(state(service("shop", "b"), service("default", "z"), service("shop", "a")));
    assert.deepEqual(
      doc.services.map((s) => `${s.namespace}/${s.name}`),
      ["default/z", "shop/a", "shop/b"],
    );
  });

  test("a namespace sorts before a longer one it begins, as a pair would: 'shop' before 'shop-eu'", () => {
    const doc = localStateToJson(
      state(service("shop-eu", "a"), service("shop", "z"), service("shop.x", "a")),
    );
    assert.deepEqual(
      doc.services.map((s) => `${s.namespace}/${s.name}`),
      ["shop/z", "shop-eu/a", "shop.x/a"],
    );
  });

  const endpointCases: { name: string; endpoints: LocalEndpoint[]; want: string[] }[] = [
    {
      name: "endpoints print as ip:port",
      endpoints: [ep("198.51.100.2", 8080)],
      want: ["198.51.100.2:8080"],
    },
    {
      name: "IPv6 endpoints print with the address in brackets",
      endpoints: [ep("2001:db8:1::8", 8080)],
      want: ["[2001:db8:1::8]:8080"],
    },
    {
      name: "endpoint lists keep the model's order (the brain sorted them)",
      endpoints: [ep("198.51.100.9", 80), ep("198.51.100.10", 80), ep("2001:db8:1::1", 80)],
      want: ["198.51.100.9:80", "198.51.100.10:80", "[2001:db8:1::1]:80"],
    },
    {
      name: "no endpoints is an empty list",
      endpoints: [],
      want: [],
    },
  ];
  for (const tc of endpointCases) {
    test(tc.name, () => {
      const svc = service("default", "web", {
        ports: [port({ internalEndpoints: tc.endpoints, externalEndpoints: tc.endpoints })],
      });
      const jsonPort = localStateToJson(state(svc)).services[0]?.ports[0];
      assert.deepEqual(jsonPort?.internalEndpoints, tc.want);
      assert.deepEqual(jsonPort?.externalEndpoints, tc.want);
    });
  }

  test("every documented field is present, in the documented order", () => {
    const svc = service("default", "lb", {
      type: "LoadBalancer",
      clusterIPs: ["203.0.113.13", "2001:db8:2::13"],
      externalIPs: ["203.0.113.100"],
      loadBalancerIPs: ["203.0.113.201"],
      sourceRanges: ["192.0.2.0/24"],
      sessionAffinitySeconds: 600,
      externalTrafficPolicy: "Local",
      healthCheckNodePort: 32081,
      localReadyEndpoints: 1,
      ports: [
        port({
          nodePort: 30081,
          endpointFamilies: ["IPv4", "IPv6"],
          externalEndpoints: [ep("198.51.100.20", 8080)],
        }),
      ],
    });
    const doc = localStateToJson(state(svc));
    assert.deepEqual(Object.keys(doc), ["node", "revision", "serviceCIDRs", "services"]);
    const s = doc.services[0]!;
    assert.deepEqual(Object.keys(s), [
      "namespace",
      "name",
      "type",
      "clusterIPs",
      "externalIPs",
      "loadBalancerIPs",
      "sourceRanges",
      "sessionAffinitySeconds",
      "internalTrafficPolicy",
      "externalTrafficPolicy",
      "healthCheckNodePort",
      "localReadyEndpoints",
      "ports",
    ]);
    assert.deepEqual(Object.keys(s.ports[0]!), [
      "name",
      "protocol",
      "port",
      "nodePort",
      "hasEndpoints",
      "endpointFamilies",
      "internalEndpoints",
      "externalEndpoints",
    ]);
    assert.deepEqual(s.clusterIPs, ["203.0.113.13", "2001:db8:2::13"], "primary family first, as given");
    assert.equal(s.healthCheckNodePort, 32081);
    assert.equal(s.sessionAffinitySeconds, 600);
    assert.deepEqual(s.ports[0]?.externalEndpoints, ["198.51.100.20:8080"]);
  });

  test("equal states give byte-identical documents", () => {
    const a = state(service("shop", "b"), service("default", "a"));
    const b = state(service("default", "a"), service("shop", "b"));
    assert.equal(JSON.stringify(localStateToJson(a)), JSON.stringify(localStateToJson(b)));
  });
});
