// One change fanned out to many nodes: nodes whose delta is made of the same service objects share
// one change set (built once), and every node's change set holds exactly the ops that take its
// previous state to its current one.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Frame } from "../../../src/api/frames.ts";
import { fullDelta, localChangeFrames, sharedChangeFrames } from "../../../src/api/local-diff.ts";
import { LocalStateHub, NodeStates } from "../../../src/api/local-hub.ts";
import { localStateFeed } from "../../../src/brain/local-state-feed.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import { settle } from "../../support/settle.ts";
import { ep, node, slice, svc } from "../brain/fixtures.ts";
import { endpoint, localState, service, servicePort, wireOps } from "./fixtures.ts";

const ZONE = "topology.kubernetes.io/zone";
const NODES = 30;
const zoneOf = (n: number) => `z${n % 3}`;

/** Service i's three endpoints on nodes (i + e·step) % NODES; service 1 has traffic policy Local. */
function endpointsOf(i: number, step = 1) {
  return slice(
    [0, 1, 2].map((e) =>
      ep(`10.0.${i}.${e + 1 + step}`, {
        node: `n${(i + e * step) % NODES}`,
        zone: zoneOf((i + e * step) % NODES),
        ...(i === 2 && { zoneHints: [zoneOf((i + e * step) % NODES)] }),
      }),
    ),
    { name: `s${i}-a`, service: `s${i}` },
  );
}

function cluster(): ClusterStore {
  const store = new ClusterStore();
  for (let n = 0; n < NODES; n++) store.upsert(node(`n${n}`, { [ZONE]: zoneOf(n) }));
  for (let i = 0; i < 6; i++) {
    store.upsert(
      svc({
        name: `s${i}`,
        clusterIP: `198.51.100.${i + 1}`,
        clusterIPs: [`198.51.100.${i + 1}`],
        internalTrafficPolicy: i === 1 ? "Local" : "Cluster",
        ...(i === 2 && { annotations: { "service.kubernetes.io/topology-mode": "Auto" } }),
      }),
    );
    store.upsert(endpointsOf(i));
  }
  store.synced();
  store.flush();
  return store;
}

describe("a change set shared by the nodes whose delta is the same", () => {
  for (const [what, service, step] of [
    ["an endpoint of a Cluster-policy service moves", 0, 5],
    ["an endpoint of a Local-policy service moves", 1, 5],
    ["an endpoint of a service with zone hints moves", 2, 7],
  ] as const) {
    test(`${what}: one change set per distinct delta, each node's the ops from its state to the next`, async () => {
      const store = cluster();
      const hub = new LocalStateHub((name) => localStateFeed(store, name));
      const nodes = Array.from({ length: NODES }, (_, n) => hub.acquire(`n${n}`));
      await settle();
      const before = nodes.map((s) => ({ revision: s.revision!, services: s.current!.state.services }));

      store.upsert(endpointsOf(service, step));
      store.flush();
      await settle();

      const sets = nodes.map((s, n) => s.framesSince(before[n]!.revision)!);
      const objects = new Map<object, number>();
      const idOf = (o: object | undefined) =>
        o === undefined ? 0 : (objects.get(o) ?? objects.set(o, objects.size + 1).get(o)!);
      const byDelta = new Map<string, readonly Frame[]>();
      for (const [n, frames] of sets.entries()) {
        const after = nodes[n]!.current!.state.services;
        const delta = fullDelta(before[n]!.services, after);
        assert.deepEqual(wireOps(frames), wireOps(localChangeFrames(delta)), `n${n}`);
        // The service objects the node's delta is made of, before and after.
        const made = [...delta.keys]
          .sort()
          .map((k) => `${k} ${idOf(delta.before(k))} ${idOf(delta.after(k))}`)
          .join(",");
        const shared = byDelta.get(made);
        if (shared === undefined) byDelta.set(made, frames);
        else assert.equal(frames, shared, `n${n}: the delta of other nodes, the same list`);
      }
      // One list per distinct delta, not one per node.
      assert.equal(new Set(sets).size, byDelta.size);
      assert.ok(byDelta.size < NODES / 2, `${byDelta.size} distinct deltas for ${NODES} nodes`);
      assert.ok(
        sets.some((frames) => frames.length > 0),
        "some node sees the change",
      );
      hub.close();
    });
  }

  test("a resume from two revisions back gets the merged delta, not a shared one-step list", async () => {
    const store = cluster();
    const hub = new LocalStateHub((name) => localStateFeed(store, name));
    const [a, b] = [hub.acquire("n3"), hub.acquire("n6")];
    await settle();
    const first = a!.revision!;
    const firstServices = a!.current!.state.services;
    store.upsert(endpointsOf(0, 5));
    store.flush();
    await settle();
    const oneStep = b!.framesSince(b!.revision! - 1);
    store.upsert(endpointsOf(3, 5));
    store.flush();
    await settle();
    const merged = a!.framesSince(first)!;
    assert.notEqual(merged, oneStep);
    assert.deepEqual(
      wireOps(merged),
      wireOps(localChangeFrames(fullDelta(firstServices, a!.current!.state.services))),
    );
    hub.close();
  });

  test("Node facts and Service ranges are part of a delta: nodes with the same services but other facts do not share", () => {
    const web = service("web", { ports: [] });
    const db = service("db");
    const states = ["n1", "n2"].map((name) => {
      let r = 0;
      const s = new NodeStates(name, () => ++r);
      s.push({ ...localState(name, 1, [web]), nodeIPs: [] });
      return s;
    });
    states[0]!.push({ ...localState("n1", 2, [web, db]), nodeIPs: ["192.0.2.1"] });
    states[1]!.push({ ...localState("n2", 2, [web, db]), nodeIPs: ["192.0.2.2"] });
    const [one, two] = states.map((s) => s.framesSince(1)!);
    assert.notEqual(one, two);
    const [ops1, ops2] = [wireOps(one!), wireOps(two!)];
    assert.equal(ops1[0]!.path, "node");
    assert.equal(ops2[0]!.path, "node");
    assert.notDeepEqual(ops1[0], ops2[0], "each node's own IPs");
    assert.deepEqual(ops1.slice(1), ops2.slice(1), "the same service ops");
    assert.deepEqual(
      ops1.slice(1).map((o) => `${o.op} ${o.path}`),
      ["set default/db", "set default/db/192.0.2.1"],
    );
  });

  test("the shared list equals the list built for the delta alone, for every kind of delta", () => {
    const a = service("a", { ports: [] });
    const b = service("b");
    const b2 = service("b", { ports: [servicePort({ internalEndpoints: [endpoint("10.9.0.1", 8080)] })] });
    const maps = [new Map([["default/a", a]]), new Map([["default/b", b]]), new Map([["default/b", b2]])];
    for (const before of maps) {
      for (const after of maps) {
        for (const ranges of [undefined, { before: [], after: ["198.51.100.0/24"] }]) {
          const delta = fullDelta(before, after, ranges);
          assert.deepEqual(wireOps(sharedChangeFrames(delta)), wireOps(localChangeFrames(delta)));
        }
      }
    }
    // The same delta twice is one list; with other ranges it is another.
    const twice = sharedChangeFrames(fullDelta(maps[1]!, maps[2]!));
    assert.equal(sharedChangeFrames(fullDelta(maps[1]!, maps[2]!)), twice);
    assert.notEqual(
      sharedChangeFrames(fullDelta(maps[1]!, maps[2]!, { before: [], after: ["198.51.100.0/24"] })),
      twice,
    );
  });
});
