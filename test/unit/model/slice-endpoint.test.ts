import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { isDeepStrictEqual } from "node:util";
import type { SliceEndpoint } from "../../../src/model/kube.ts";
import {
  endpointHints,
  firstAddress,
  OneAddressEndpoint,
  withConditions,
} from "../../../src/model/slice-endpoint.ts";
import { readEndpointSlice } from "../../../src/model/validate-endpointslice.ts";

const READY = { ready: true, serving: true, terminating: false };
const GONE = { ready: false, serving: true, terminating: true };

/** Every field of SliceEndpoint, read as consumers read them. */
function fields(ep: SliceEndpoint): SliceEndpoint {
  const { addresses, conditions, hostname, nodeName, zone, zoneHints, nodeHints, podName } = ep;
  return { addresses, conditions, hostname, nodeName, zone, zoneHints, nodeHints, podName };
}

const plain: SliceEndpoint = {
  addresses: ["203.0.113.1"],
  conditions: READY,
  hostname: "h",
  nodeName: "n1",
  zone: "z1",
  zoneHints: ["z1"],
  nodeHints: ["n1"],
  podName: "web-1",
};

const compact = new OneAddressEndpoint(
  "203.0.113.1",
  READY,
  "h",
  "n1",
  "z1",
  endpointHints(["z1"], ["n1"]),
  "web-1",
);

describe("OneAddressEndpoint: an endpoint of one address, kept without a list", () => {
  test("reads field for field as the endpoint it stands for", () => {
    assert.deepEqual(fields(compact), plain);
    assert.equal(firstAddress(compact), "203.0.113.1");
    assert.equal(firstAddress(plain), "203.0.113.1");
    assert.equal(firstAddress({ ...plain, addresses: [] }), undefined);
  });

  test("its JSON is the plain endpoint's, key for key in the same order", () => {
    assert.equal(JSON.stringify(compact), JSON.stringify(plain));
  });

  test("endpoints without hints share one hints object", () => {
    assert.equal(endpointHints([], []), endpointHints([], []));
    assert.deepEqual(endpointHints(["z1"], []), { zoneHints: ["z1"], nodeHints: [] });
  });

  test("withConditions changes the conditions and keeps every other field, of either kind", () => {
    for (const ep of [compact, plain]) {
      const changed = withConditions(ep, GONE);
      assert.deepEqual(fields(changed), { ...plain, conditions: GONE });
    }
    // What a spread would have lost: the getters' fields.
    assert.equal(({ ...compact } as Partial<SliceEndpoint>).addresses, undefined);
  });

  test("validation keeps an endpoint of one address as one, and one of several as a list", () => {
    const slice = (addressType: string, endpoints: unknown[]) =>
      readEndpointSlice(
        {
          kind: "EndpointSlice",
          apiVersion: "discovery.k8s.io/v1",
          metadata: { name: "web-1", namespace: "d", labels: { "kubernetes.io/service-name": "web" } },
          addressType,
          endpoints,
        },
        "d",
      ).endpoints;
    // IPv4 endpoints as the API writes them take the fast reader, IPv6 ones the field-by-field one.
    const [one, two] = slice("IPv4", [
      { addresses: ["203.0.113.1"] },
      { addresses: ["203.0.113.2", "203.0.113.3"] },
    ]);
    assert.ok(one instanceof OneAddressEndpoint);
    assert.deepEqual(two?.addresses, ["203.0.113.2", "203.0.113.3"]);
    assert.ok(!(two instanceof OneAddressEndpoint));
    const [six] = slice("IPv6", [{ addresses: ["2001:DB8::1"], hints: { forZones: [{ name: "z1" }] } }]);
    assert.ok(six instanceof OneAddressEndpoint);
    assert.equal(firstAddress(six), "2001:db8::1");
    assert.deepEqual(six.zoneHints, ["z1"]);
    // The store skips a slice read again unchanged by comparing the two, so they must compare equal.
    const raw = [{ addresses: ["203.0.113.1"], hints: { forZones: [{ name: "z1" }] } }];
    assert.ok(isDeepStrictEqual(slice("IPv4", raw), slice("IPv4", raw)));
    assert.ok(!isDeepStrictEqual(slice("IPv4", raw), slice("IPv4", [{ ...raw[0], zone: "z2" }])));
  });
});
