// The hand-written Set and Delete frames are byte for byte what the generated encoder writes.

import assert from "node:assert/strict";
import { test } from "node:test";
import {
  deleteFrame,
  GRPC_PREFIX_BYTES,
  opItemsOf,
  resetFrame,
  setFrame,
  syncFrame,
} from "../../../src/api/frames.ts";
import { OpItem, Set as WireSet } from "../../../src/api/gen/api/localv1/api.ts";

function generated(op: OpItem["Op"]): Buffer {
  const message = OpItem.encode({ Op: op }).finish();
  const out = Buffer.alloc(GRPC_PREFIX_BYTES + message.length);
  out.writeUInt32BE(message.length, 1);
  out.set(message, GRPC_PREFIX_BYTES);
  return out;
}

const bytesOf = (n: number) => Buffer.from(Uint8Array.from({ length: n }, (_, i) => (i * 7) & 255));

const cases: { name: string; set: WireSet; path: string; bytes: Buffer }[] = [
  { name: "service", set: WireSet.ServicesSet, path: "default/web", bytes: bytesOf(90) },
  { name: "endpoint", set: WireSet.EndpointsSet, path: "ns-1/svc-1/10.0.0.1", bytes: bytesOf(40) },
  { name: "IPv6 endpoint", set: WireSet.EndpointsSet, path: "a/b/2001:db8::1", bytes: bytesOf(3) },
  { name: "empty value", set: WireSet.ServicesSet, path: "default/empty", bytes: Buffer.alloc(0) },
  { name: "value of 127 bytes", set: WireSet.ServicesSet, path: "x/y", bytes: bytesOf(127) },
  { name: "value of 128 bytes", set: WireSet.ServicesSet, path: "x/y", bytes: bytesOf(128) },
  {
    name: "value of 20,000 bytes",
    set: WireSet.ServiceCIDRsSet,
    path: "service-cidrs",
    bytes: bytesOf(20_000),
  },
  { name: "value of 3 MB", set: WireSet.EndpointsSet, path: "x/y/z", bytes: bytesOf(3_000_000) },
  {
    name: "path of 300 characters",
    set: WireSet.ServicesSet,
    path: `ns/${"s".repeat(297)}`,
    bytes: bytesOf(5),
  },
  { name: "non-ASCII path", set: WireSet.ServicesSet, path: "déjà/vu-✓", bytes: bytesOf(5) },
  { name: "unknown set, empty path", set: WireSet.UnknownSet, path: "", bytes: bytesOf(2) },
];

for (const c of cases) {
  test(`setFrame: ${c.name}`, () => {
    const expected = generated({
      $case: "Set",
      value: { Ref: { Set: c.set, Path: c.path }, Bytes: c.bytes },
    });
    assert.deepEqual(setFrame(c.set, c.path, c.bytes), expected);
  });
  test(`deleteFrame: ${c.name}`, () => {
    const expected = generated({ $case: "Delete", value: { Set: c.set, Path: c.path } });
    assert.deepEqual(deleteFrame(c.set, c.path), expected);
  });
}

test("a frame is one OpItem that decodes to what was asked", () => {
  const [item] = opItemsOf(setFrame(WireSet.EndpointsSet, "a/b/192.0.2.1", bytesOf(10)));
  const op = OpItem.decode(item!).Op;
  assert.equal(op?.$case, "Set");
  assert.deepEqual(op.$case === "Set" && op.value.Ref, { Set: WireSet.EndpointsSet, Path: "a/b/192.0.2.1" });
});

for (const [instanceId, revision] of [
  ["0123456789abcdef", 1],
  ["0123456789abcdef", 127],
  ["0123456789abcdef", 128],
  ["0123456789abcdef", 300_000],
  ["0123456789abcdef", 2 ** 40 + 3],
  ["", 5],
  ["", 0],
] as const) {
  test(`syncFrame and resetFrame: instance "${instanceId}", revision ${revision}`, () => {
    assert.deepEqual(
      syncFrame(instanceId, revision),
      generated({
        $case: "Sync",
        value: { InstanceID: instanceId, Revision: revision, ReadsProgrammed: false },
      }),
    );
    assert.deepEqual(
      syncFrame(instanceId, revision, true),
      generated({
        $case: "Sync",
        value: { InstanceID: instanceId, Revision: revision, ReadsProgrammed: true },
      }),
    );
    assert.deepEqual(
      resetFrame(instanceId),
      generated({ $case: "Reset", value: { InstanceID: instanceId, Revision: 0, ReadsProgrammed: false } }),
    );
  });
}
