// A port's endpoints split per IP family, as the brain hands them to every backend: each family's
// rules program only that family's lists, and the flat lists are the two joined (IPv4 first).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { computeLocalService } from "../../../src/brain/local-service.ts";
import type { EndpointSlice, Service } from "../../../src/model/kube.ts";
import {
  endpointString,
  type FamilyEndpoints,
  familyEndpoints,
  withFamilyEndpoints,
} from "../../../src/model/local.ts";
import { dualStack, ep, slice, svc, THIS_NODE } from "./fixtures.ts";

interface Row {
  readonly name: string;
  readonly service: Service;
  readonly slices: readonly EndpointSlice[];
  /** "ip:port" per family and kind; a list not named is empty. */
  readonly IPv4?: { readonly internal?: string[]; readonly external?: string[] };
  readonly IPv6?: { readonly internal?: string[]; readonly external?: string[] };
}

const A = "203.0.113.1";
const B = "203.0.113.2";
const V6A = "2001:db8::1";
const V6B = "2001:db8::2";
const v6 = (ip: string) => `[${ip}]:8080`;

const rows: Row[] = [
  {
    name: "single-stack IPv4: every endpoint in IPv4, none in IPv6",
    service: svc(),
    slices: [slice([ep(A), ep(B)])],
    IPv4: { internal: [`${A}:8080`, `${B}:8080`] },
  },
  {
    name: "single-stack IPv6: every endpoint in IPv6",
    service: svc({ clusterIP: "2001:db8::10", clusterIPs: ["2001:db8::10"], ipFamilies: ["IPv6"] }),
    slices: [slice([ep(V6B), ep(V6A)])],
    IPv6: { internal: [v6(V6A), v6(V6B)] },
  },
  {
    name: "single-stack IPv4 with IPv6 slices too: the family without a cluster IP carries nothing",
    service: svc(),
    slices: [slice([ep(A)]), slice([ep(V6A)])],
    IPv4: { internal: [`${A}:8080`] },
  },
  {
    name: "dual-stack: each family its own endpoints",
    service: dualStack(),
    slices: [slice([ep(A), ep(B)]), slice([ep(V6A)])],
    IPv4: { internal: [`${A}:8080`, `${B}:8080`] },
    IPv6: { internal: [v6(V6A)] },
  },
  {
    name: "dual-stack, IPv6 primary: the split does not depend on which family is primary",
    service: dualStack({
      clusterIP: "2001:db8::10",
      clusterIPs: ["2001:db8::10", "198.51.100.10"],
      ipFamilies: ["IPv6", "IPv4"],
    }),
    slices: [slice([ep(V6A)]), slice([ep(A)])],
    IPv4: { internal: [`${A}:8080`] },
    IPv6: { internal: [v6(V6A)] },
  },
  {
    name: "dual-stack with endpoints in one family only: the other family has none",
    service: dualStack(),
    slices: [slice([ep(V6A), ep(V6B)])],
    IPv6: { internal: [v6(V6A), v6(V6B)] },
  },
  {
    name: "dual-stack NodePort: external endpoints per family as well",
    service: dualStack({
      type: "NodePort",
      ports: [{ name: "http", protocol: "TCP", port: 80, nodePort: 30080 }],
    }),
    slices: [slice([ep(A)]), slice([ep(V6A)])],
    IPv4: { internal: [`${A}:8080`], external: [`${A}:8080`] },
    IPv6: { internal: [v6(V6A)], external: [v6(V6A)] },
  },
  {
    name: "dual-stack eTP Local, externalIP in IPv4 only: IPv4 alone has external endpoints, the local ones",
    service: dualStack({ externalTrafficPolicy: "Local", externalIPs: ["192.0.2.5"] }),
    slices: [slice([ep(A, { node: "n1" }), ep(B)]), slice([ep(V6A, { node: "n1" })])],
    IPv4: { internal: [`${A}:8080`, `${B}:8080`], external: [`${A}:8080`] },
    IPv6: { internal: [v6(V6A)] },
  },
  {
    name: "dual-stack iTP Local: each family's internal list holds its local endpoints only",
    service: dualStack({ internalTrafficPolicy: "Local" }),
    slices: [slice([ep(A, { node: "n1" }), ep(B)]), slice([ep(V6A), ep(V6B, { node: "n1" })])],
    IPv4: { internal: [`${A}:8080`] },
    IPv6: { internal: [v6(V6B)] },
  },
];

describe("endpoints split per family", () => {
  for (const row of rows)
    test(row.name, () => {
      const local = computeLocalService(row.service, row.slices, THIS_NODE);
      const port = local?.ports[0];
      assert.ok(port);
      for (const family of ["IPv4", "IPv6"] as const) {
        const got: FamilyEndpoints = familyEndpoints(port, family);
        const want = row[family] ?? {};
        assert.deepEqual(got.internal.map(endpointString), want.internal ?? [], `${family} internal`);
        assert.deepEqual(got.external.map(endpointString), want.external ?? [], `${family} external`);
      }
      // The flat lists are the two families joined, IPv4 first: what the dump and the wire carry.
      const IPv4 = familyEndpoints(port, "IPv4");
      const IPv6 = familyEndpoints(port, "IPv6");
      assert.deepEqual(port.internalEndpoints, [...IPv4.internal, ...IPv6.internal]);
      assert.deepEqual(port.externalEndpoints, [...IPv4.external, ...IPv6.external]);
      // A decoder that reads the flat lists back splits them the same way.
      assert.deepEqual(withFamilyEndpoints(port), port);
    });

  test("a single-family port shares its lists with the flat ones: no copy per port", () => {
    const port = computeLocalService(svc(), [slice([ep(A)])], THIS_NODE)?.ports[0];
    assert.ok(port);
    assert.equal(familyEndpoints(port, "IPv4").internal, port.internalEndpoints);
    assert.equal(familyEndpoints(port, "IPv4").external, port.externalEndpoints);
  });

  test("a port built by hand with IPv6 first is put in family order, each family's order kept", () => {
    const at = (ip: string) => ({
      ip,
      port: 80,
      local: false,
      ready: true,
      serving: true,
      terminating: false,
    });
    const port = withFamilyEndpoints({
      name: "",
      protocol: "TCP",
      port: 80,
      nodePort: 0,
      hasEndpoints: true,
      endpointFamilies: ["IPv4", "IPv6"],
      internalEndpoints: [at(V6B), at(B), at(V6A), at(A)],
      externalEndpoints: [],
    });
    assert.deepEqual(
      port.internalEndpoints.map((e) => e.ip),
      [B, A, V6B, V6A],
    );
    assert.deepEqual(
      familyEndpoints(port, "IPv6").internal.map((e) => e.ip),
      [V6B, V6A],
    );
    assert.deepEqual(familyEndpoints(port, "IPv4").external, []);
  });
});
