import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { planWrites } from "../../../../src/controllers/fallback/plan.ts";
import { buildFallbackSlices, toApiObject } from "../../../../src/controllers/fallback/slices.ts";
import type { EndpointSlice } from "../../../../src/model/kube.ts";
import { parseEndpointSlice } from "../../../../src/model/validate.ts";
import { svc } from "../../brain/fixtures.ts";
import { pod } from "./fixtures.ts";

const SERVICE = svc({ ports: [{ name: "http", targetPort: "http" }] });

function desired(active: boolean, pods = [pod("a", "203.0.113.1", { node: "n2" }), pod("b", "203.0.113.2")]) {
  return buildFallbackSlices({ service: SERVICE, pods, zoneOf: () => "z1", active });
}

/** The slices as the API server hands them back: written, then read through the proxy's parser. */
function stored(specs: ReturnType<typeof desired>, rv = "7"): EndpointSlice[] {
  return specs.map((spec) => {
    const result = parseEndpointSlice(toApiObject(spec, SERVICE, rv));
    assert.ok(result.ok, result.ok ? "" : result.reason);
    return result.value;
  });
}

describe("fallback slice writes", () => {
  test("nothing there: create", () => {
    assert.deepEqual(
      planWrites([], desired(false)).map((w) => w.verb),
      ["create"],
    );
  });

  test("what was written, read back, needs no write (a resync writes nothing)", () => {
    assert.deepEqual(planWrites(stored(desired(true)), desired(true)), []);
    assert.deepEqual(planWrites(stored(desired(false)), desired(false)), []);
  });

  test("activation rewrites the slice, with the resourceVersion it was read at", () => {
    const writes = planWrites(stored(desired(false), "42"), desired(true));
    assert.equal(writes.length, 1);
    assert.equal(writes[0]?.verb, "update");
    assert.equal(writes[0]?.verb === "update" && writes[0].resourceVersion, "42");
  });

  test("a pod's readiness change rewrites the slice", () => {
    const notReady = desired(true, [
      pod("a", "203.0.113.1", { node: "n2", ready: false }),
      pod("b", "203.0.113.2"),
    ]);
    assert.deepEqual(
      planWrites(stored(desired(true)), notReady).map((w) => w.verb),
      ["update"],
    );
  });

  test("slices no longer wanted are deleted with their resourceVersion", () => {
    const writes = planWrites(stored(desired(true), "9"), []);
    assert.deepEqual(writes, [{ verb: "delete", name: desired(true)[0]?.name, resourceVersion: "9" }]);
  });
});
