// Full states built from shared segments are byte for byte the naive encoding, for nodes that
// share most services and differ in a few, and segments are shared between such nodes.

import assert from "node:assert/strict";
import { test } from "node:test";
import { FullStateSegments } from "../../../src/api/full-state-segments.ts";
import { encodedService, localFullFrames } from "../../../src/api/local-diff.ts";
import type { LocalService } from "../../../src/model/local.ts";
import { endpoint, service, servicePort } from "./fixtures.ts";

const shared = (i: number) =>
  service(`s${String(i).padStart(3, "0")}`, {
    ports: [
      servicePort({
        internalEndpoints: [0, 1, 2].map((e) => endpoint(`192.0.2.${e + 1}`, 8000 + i)),
      }),
    ],
  });

/** A node's own version of service i: its endpoint is local. */
const own = (i: number) =>
  service(`s${String(i).padStart(3, "0")}`, {
    ports: [
      servicePort({
        internalEndpoints: [0, 1, 2].map((e) => endpoint(`192.0.2.${e + 1}`, 8000 + i, { local: e === 0 })),
      }),
    ],
  });

/** Every service's Set, then every service's endpoint Sets, key by key. */
function naive(services: ReadonlyMap<string, LocalService>): Buffer {
  const sorted = [...services.keys()].sort().map((k) => encodedService(services.get(k)!));
  return Buffer.concat([...sorted.map((e) => e.service.frame), ...sorted.map((e) => e.endpointSets)]);
}

test("full states of nodes sharing most services equal the naive encoding", () => {
  const base = Array.from({ length: 100 }, (_, i) => shared(i));
  const nodes: Map<string, LocalService>[] = [];
  for (let n = 0; n < 12; n++) {
    // Each node holds its own version of a few services; some nodes none; one has fewer services.
    const services = base.map((s, i) => ((i * 7 + n) % 13 === 0 ? own(i) : s));
    const list = n === 5 ? services.slice(0, 37) : services;
    nodes.push(new Map(list.map((s) => [`default/${s.name}`, s])));
  }
  // Twice over: the second round is served from the segments the first one built.
  for (const round of [1, 2]) {
    for (const [n, map] of nodes.entries())
      assert.deepEqual(Buffer.concat(localFullFrames(map)), naive(map), `round ${round}, node ${n}`);
  }
});

test("nodes holding the same objects share the segments' buffers", () => {
  const segments = new FullStateSegments((s) => {
    const e = encodedService(s);
    return { service: e.service.frame, endpointSets: e.endpointSets };
  });
  const base = Array.from({ length: 64 }, (_, i) => shared(i));
  const first = segments.frames(base);
  assert.equal(first.services.length, 64, "seen once: each service's own frame, nothing copied");
  const a = segments.frames(base);
  assert.equal(a.services.length, 4, "seen twice: 64 services in 4 segments of 16");
  const mine = own(20);
  const withMine = base.map((s, i) => (i === 20 ? mine : s));
  const b = segments.frames(withMine);
  assert.equal(b.services.length, 3 + 16, "the segment holding the node's own service is not built");
  assert.equal(b.services[0], a.services[0]);
  assert.equal(b.services[1 + 16], a.services[2]);
  assert.equal(b.services[1 + 4], encodedService(mine).service.frame);
  assert.deepEqual(
    Buffer.concat(b.services),
    Buffer.concat(withMine.map((s) => encodedService(s).service.frame)),
  );
  // More variants of one segment than are kept: still right, and the shared one survives.
  for (let v = 0; v < 20; v++) {
    const variant = base.map((s, i) => (i === 3 ? own(3) : s));
    for (const _ of [1, 2]) {
      const frames = segments.frames(variant);
      assert.deepEqual(
        Buffer.concat(frames.services),
        Buffer.concat(variant.map((s) => encodedService(s).service.frame)),
      );
      assert.deepEqual(
        Buffer.concat(frames.endpoints),
        Buffer.concat(variant.map((s) => encodedService(s).endpointSets)),
      );
    }
    assert.equal(segments.frames(base).services[0], a.services[0]);
  }
});
