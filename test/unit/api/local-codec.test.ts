import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Service } from "../../../src/api/gen/api/localv1/api.ts";
import { decodeLocalService, encodeLocalService } from "../../../src/api/local-codec.ts";
import { computeLocalService } from "../../../src/brain/local-service.ts";
import { familyEndpoints } from "../../../src/model/local.ts";
import { dualStack as dualStackSpec, ep, slice, THIS_NODE } from "../brain/fixtures.ts";
import { service } from "./fixtures.ts";

const dualStack = service("web", {
  type: "LoadBalancer",
  clusterIPs: ["2001:db8::10", "198.51.100.10"],
  externalIPs: ["203.0.113.9", "2001:db8::9", "203.0.113.1"],
  loadBalancerIPs: ["203.0.113.5"],
  sourceRanges: ["2001:db8:1::/48", "203.0.113.0/24"],
});

describe("local codec: addresses per family", () => {
  test("each wire IPSet holds a family's addresses in address order", () => {
    const wire = encodeLocalService(dualStack).service;
    assert.deepEqual(wire.IPs?.ClusterIPs, { V4: ["198.51.100.10"], V6: ["2001:db8::10"] });
    assert.deepEqual(wire.IPs?.ExternalIPs, { V4: ["203.0.113.1", "203.0.113.9"], V6: ["2001:db8::9"] });
    assert.deepEqual(wire.IPs?.LoadBalancerIPs, { V4: ["203.0.113.5"], V6: [] });
    assert.deepEqual(wire.IPFilters, [
      { TargetIPs: { V4: ["203.0.113.5"], V6: [] }, SourceRanges: ["2001:db8:1::/48", "203.0.113.0/24"] },
    ]);
    assert.deepEqual(wire.ClusterIPsOrdered, ["2001:db8::10", "198.51.100.10"]);
  });

  test("a round trip keeps every family and the primary family first", () => {
    const { service: wire, endpoints } = encodeLocalService(dualStack);
    assert.deepEqual(decodeLocalService(wire, endpoints.values()).families, dualStack.families);
  });

  test("an older server's sets only: IPv4 first, addresses canonical, each in its family", () => {
    const wire = Service.fromPartial({
      Namespace: "default",
      Name: "old",
      Type: "ClusterIP",
      IPs: {
        ClusterIPs: { V4: ["198.51.100.10"], V6: ["2001:DB8:0::10"] },
        ExternalIPs: { V4: [], V6: ["2001:db8:0:0::9"] },
        Headless: false,
      },
      IPFilters: [{ SourceRanges: ["2001:db8:1::/48"] }],
    });
    assert.deepEqual(decodeLocalService(wire, []).families, [
      { family: "IPv4", clusterIP: "198.51.100.10", externalIPs: [], loadBalancerIPs: [], sourceRanges: [] },
      {
        family: "IPv6",
        clusterIP: "2001:db8::10",
        externalIPs: ["2001:db8::9"],
        loadBalancerIPs: [],
        sourceRanges: ["2001:db8:1::/48"],
      },
    ]);
  });

  test("a cluster IP that is no address is refused with the reason", () => {
    const wire = Service.fromPartial({
      Namespace: "d",
      Name: "x",
      Type: "ClusterIP",
      ClusterIPsOrdered: ["nope"],
    });
    assert.throws(() => decodeLocalService(wire, []), /cluster IP "nope" is not an IP address/);
  });
});

describe("local codec: endpoints per family", () => {
  test("the decoder rebuilds the brain's ports, each family's endpoints where the brain put them", () => {
    const computed = computeLocalService(
      dualStackSpec({
        type: "NodePort",
        ports: [{ name: "http", protocol: "TCP", port: 80, nodePort: 30080 }],
      }),
      [slice([ep("203.0.113.2"), ep("203.0.113.1", { node: THIS_NODE.name })]), slice([ep("2001:db8::1")])],
      THIS_NODE,
    );
    assert.ok(computed);
    const { service: wire, endpoints } = encodeLocalService(computed);
    const decoded = decodeLocalService(wire, endpoints.values());
    assert.deepEqual(decoded.ports, computed.ports);
    const port = decoded.ports[0]!;
    assert.deepEqual(
      familyEndpoints(port, "IPv4").internal.map((e) => e.ip),
      ["203.0.113.1", "203.0.113.2"],
    );
    assert.deepEqual(
      familyEndpoints(port, "IPv6").external.map((e) => e.ip),
      ["2001:db8::1"],
    );
  });

  test("an endpoint port out of 0–65535 is refused with the reason", () => {
    const computed = computeLocalService(
      dualStackSpec({ type: "ClusterIP", ports: [{ name: "http", protocol: "TCP", port: 80 }] }),
      [slice([ep("203.0.113.2")])],
      THIS_NODE,
    );
    assert.ok(computed);
    const { service: wire, endpoints } = encodeLocalService(computed);
    const bad = [...endpoints.values()].map((e) => ({
      ...e,
      PortScopes: e.PortScopes.map((s) => ({ ...s, Port: 70000 })),
    }));
    assert.throws(() => decodeLocalService(wire, bad), /endpoint port 70000 is out of range/);
  });
});
