// Endpoint values are encoded once for every node that sees them alike: the fingerprint tells
// apart exactly the values that encode differently, and a node's own LocalService reuses the
// other nodes' frames for every endpoint it sees as they do.

import assert from "node:assert/strict";
import { test } from "node:test";
import { opItemsOf } from "../../../src/api/frames.ts";
import { type Endpoint, Endpoint as EndpointCodec, OpItem } from "../../../src/api/gen/api/localv1/api.ts";
import { endpointFingerprint } from "../../../src/api/local-codec.ts";
import { encodedService } from "../../../src/api/local-diff.ts";
import { endpoint, service, servicePort } from "./fixtures.ts";

const sample = (): Endpoint => ({
  Hostname: "pod-a",
  IPs: { V4: ["192.0.2.1"], V6: [] },
  Local: false,
  PortOverrides: [{ Name: "http", Port: 8080 }],
  Scopes: { Internal: true, External: false },
  Conditions: { Ready: true, Serving: true, Terminating: false },
  PortScopes: [{ Name: "http", Port: 8080, Internal: true, External: false }],
});

/** Every leaf of a value, as a path of keys, with a different value for it. */
function* variants(
  value: unknown,
  path: (string | number)[] = [],
): Generator<[(string | number)[], unknown]> {
  if (typeof value === "boolean") yield [path, !value];
  else if (typeof value === "number") yield [path, value + 1];
  else if (typeof value === "string") yield [path, `${value}x`];
  else if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) yield* variants(v, [...path, i]);
    yield [path, []];
  } else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      yield* variants(v, [...path, k]);
      if (typeof v === "object" && !Array.isArray(v)) yield [[...path, k], undefined];
    }
  }
}

function withLeaf(base: Endpoint, path: (string | number)[], leaf: unknown): Endpoint {
  const copy = structuredClone(base) as unknown as Record<string | number, unknown>;
  let at = copy;
  for (const key of path.slice(0, -1)) at = at[key] as Record<string | number, unknown>;
  at[path.at(-1)!] = leaf;
  return copy as unknown as Endpoint;
}

test("endpointFingerprint differs whenever the encoding does, for every field", () => {
  const base = sample();
  const bytes = (e: Endpoint) => Buffer.from(EndpointCodec.encode(e).finish());
  let checked = 0;
  for (const [path, leaf] of variants(base)) {
    const other = withLeaf(base, path, leaf);
    const sameBytes = bytes(other).equals(bytes(base));
    assert.equal(
      endpointFingerprint(other) === endpointFingerprint(base),
      sameBytes,
      `${path.join(".")} = ${JSON.stringify(leaf)}`,
    );
    checked++;
  }
  assert.ok(checked >= 20, `every field was varied (${checked})`);
  assert.equal(endpointFingerprint(structuredClone(base)), endpointFingerprint(base));
});

test("a node's own LocalService shares the frames of the endpoints it sees like other nodes", () => {
  const ips = ["192.0.2.1", "192.0.2.2", "192.0.2.3"];
  const elsewhere = service("web", {
    ports: [servicePort({ internalEndpoints: ips.map((ip) => endpoint(ip, 8080)) })],
  });
  const onNode = service("web", {
    ports: [
      servicePort({
        internalEndpoints: ips.map((ip, i) => endpoint(ip, 8080, { local: i === 1 })),
      }),
    ],
  });
  const a = encodedService(elsewhere);
  const b = encodedService(onNode);
  const path = (i: number) => `default/web/${ips[i]}`;
  assert.equal(a.endpoints.get(path(0))!.frame, b.endpoints.get(path(0))!.frame, "shared");
  assert.equal(a.endpoints.get(path(2))!.frame, b.endpoints.get(path(2))!.frame, "shared");
  assert.notEqual(a.endpoints.get(path(1))!.frame, b.endpoints.get(path(1))!.frame, "its own");
  // The full state's buffer holds every endpoint's Set, in path order, with the right value.
  const items = opItemsOf(b.endpointSets).map((item) => OpItem.decode(item).Op);
  assert.deepEqual(
    items.map((op) =>
      op?.$case === "Set" ? [op.value.Ref?.Path, EndpointCodec.decode(op.value.Bytes).Local] : [],
    ),
    [
      [path(0), false],
      [path(1), true],
      [path(2), false],
    ],
  );
});
