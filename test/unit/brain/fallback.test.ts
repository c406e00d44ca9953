import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { decodeEndpointSliceInfo, encodeEndpointSliceInfo } from "../../../src/api/global-codec.ts";
import { slicesInEffect } from "../../../src/brain/fallback.ts";
import { computeLocalService } from "../../../src/brain/local-service.ts";
import type { EndpointSlice, SliceEndpoint } from "../../../src/model/kube.ts";
import { endpointsOf, ep, slice, svc, THIS_NODE } from "./fixtures.ts";

const PRIMARY = "203.0.113.1";
const FALLBACK_1 = "203.0.113.21";
const FALLBACK_2 = "203.0.113.22";

function primary(endpoints: readonly SliceEndpoint[]): EndpointSlice {
  return slice(endpoints, { name: "web-abc" });
}

function fallback(
  name: string,
  active: string | undefined,
  endpoints: readonly SliceEndpoint[],
): EndpointSlice {
  const labels: Record<string, string> = {
    "kubernetes.io/service-name": "web",
    "endpointslice.kubernetes.io/managed-by": "fallback.kpng.io",
  };
  if (active !== undefined) labels["fallback.kpng.io/active"] = active;
  return slice(endpoints, { name, labels });
}

interface Row {
  readonly name: string;
  readonly slices: readonly EndpointSlice[];
  /** Internal endpoints of port "http", as "ip:port". */
  readonly serves: readonly string[];
  readonly hasEndpoints: boolean;
}

const rows: Row[] = [
  {
    name: "a Service without fallback slices uses its own endpoints",
    slices: [primary([ep(PRIMARY)])],
    serves: [`${PRIMARY}:8080`],
    hasEndpoints: true,
  },
  {
    name: "inactive fallback slices are ignored: only the primary serves",
    slices: [primary([ep(PRIMARY)]), fallback("web-fallback-1", "false", [ep(FALLBACK_1)])],
    serves: [`${PRIMARY}:8080`],
    hasEndpoints: true,
  },
  {
    name: "inactive fallback slices are ignored even when the primary has no endpoint (reject, not fallback)",
    slices: [primary([]), fallback("web-fallback-1", "false", [ep(FALLBACK_1)])],
    serves: [],
    hasEndpoints: false,
  },
  {
    name: "a fallback slice without the active label counts as inactive",
    slices: [primary([ep(PRIMARY)]), fallback("web-fallback-1", undefined, [ep(FALLBACK_1)])],
    serves: [`${PRIMARY}:8080`],
    hasEndpoints: true,
  },
  {
    name: 'only the exact value "true" activates',
    slices: [primary([ep(PRIMARY)]), fallback("web-fallback-1", "True", [ep(FALLBACK_1)])],
    serves: [`${PRIMARY}:8080`],
    hasEndpoints: true,
  },
  {
    name: "active fallback slices replace the primary: its endpoints are not used",
    slices: [
      primary([ep(PRIMARY, { ready: false, serving: false })]),
      fallback("web-fallback-1", "true", [ep(FALLBACK_1)]),
    ],
    serves: [`${FALLBACK_1}:8080`],
    hasEndpoints: true,
  },
  {
    name: "never mixed: a primary that turned ready while the fallback is still active is not used",
    slices: [primary([ep(PRIMARY)]), fallback("web-fallback-1", "true", [ep(FALLBACK_1)])],
    serves: [`${FALLBACK_1}:8080`],
    hasEndpoints: true,
  },
  {
    name: "every active fallback slice serves",
    slices: [
      primary([]),
      fallback("web-fallback-1", "true", [ep(FALLBACK_1)]),
      fallback("web-fallback-2", "true", [ep(FALLBACK_2)]),
    ],
    serves: [`${FALLBACK_1}:8080`, `${FALLBACK_2}:8080`],
    hasEndpoints: true,
  },
  {
    name: "mid-rewrite, one slice active and one not: only the active one serves, never the primary",
    slices: [
      primary([ep(PRIMARY)]),
      fallback("web-fallback-1", "true", [ep(FALLBACK_1)]),
      fallback("web-fallback-2", "false", [ep(FALLBACK_2, { ready: false, serving: false })]),
    ],
    serves: [`${FALLBACK_1}:8080`],
    hasEndpoints: true,
  },
  {
    name: "a slice with the active label but another manager is an ordinary slice",
    slices: [
      primary([ep(PRIMARY)]),
      slice([ep(FALLBACK_1)], {
        name: "hand-made",
        labels: { "kubernetes.io/service-name": "web", "fallback.kpng.io/active": "true" },
      }),
    ],
    serves: [`${PRIMARY}:8080`, `${FALLBACK_1}:8080`],
    hasEndpoints: true,
  },
  {
    name: "an active fallback with no endpoint leaves the Service without endpoints",
    slices: [primary([ep(PRIMARY)]), fallback("web-fallback-1", "true", [])],
    serves: [],
    hasEndpoints: false,
  },
];

describe("fallback slices in the brain", () => {
  for (const row of rows) {
    test(row.name, () => {
      const local = computeLocalService(svc(), row.slices, THIS_NODE);
      assert.deepEqual(endpointsOf(local, "internal"), row.serves);
      assert.equal(local?.ports[0]?.hasEndpoints, row.hasEndpoints);
    });
  }

  test("the global API carries the labels: a brain fed by another brain applies the same rule", () => {
    const slices = [primary([ep(PRIMARY)]), fallback("web-fallback-1", "true", [ep(FALLBACK_1)])];
    const relayed = slices.map((s) => decodeEndpointSliceInfo(encodeEndpointSliceInfo(s)));
    const names = (list: readonly EndpointSlice[]) => list.map((s) => s.metadata.name);
    assert.deepEqual(names(slicesInEffect(relayed)), ["web-fallback-1"]);
  });

  test("without fallback slices the same list comes back, unfiltered", () => {
    const slices = [primary([ep(PRIMARY)])];
    assert.equal(slicesInEffect(slices), slices);
  });
});
