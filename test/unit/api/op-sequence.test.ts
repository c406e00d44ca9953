// Every change set over a multi-step scenario is `Reset? (Set|Delete)* Sync`, in kpng's order,
// and applying it brings a client exactly to the brain's state.

import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiServer } from "../../../src/api/server.ts";
import { serviceChanges } from "../../../src/model/local-changes.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { endpoint, FakeBrain, localState, service, servicePort } from "./fixtures.ts";
import { kpngWatch, type RawOp } from "./kpng-client.ts";

const eps = (...ips: string[]) => [servicePort({ internalEndpoints: ips.map((ip) => endpoint(ip, 8080)) })];

/** The rank of an op in kpng's order: service set, endpoint delete, endpoint set, service delete. */
function rank(op: RawOp): number {
  const endpointOp = op.set === "EndpointsSet";
  if (op.op === "Set") return endpointOp ? 2 : 0;
  return endpointOp ? 1 : 3;
}

test("each change set of a scenario is Reset? (Set|Delete)* Sync in kpng's order", {
  timeout: 30_000,
}, async () => {
  const brain = new FakeBrain();
  brain.update("n1", [service("a", { ports: eps("192.0.2.1") }), service("b", { ports: eps("192.0.2.2") })]);
  const server = new ApiServer({ listen: ["tcp://127.0.0.1:0"], localFeed: brain.feed, log: silentLogger });
  await server.start();
  const steps: (() => void)[] = [
    () => brain.update("n1", [service("c", { ports: eps("192.0.2.3", "2001:db8::3") })]),
    () => brain.update("n1", [service("a", { ports: eps("192.0.2.4") })], ["default/b"]),
    () => brain.update("n1", [], ["default/a", "default/c"]),
    () => brain.update("n1", [service("d", { ports: [] })]),
  ];
  try {
    // Each step waits for the change set of the one before: a client that connects late (a
    // loaded machine) would otherwise see two steps in one change set and wait forever.
    let received = 0;
    let onReceived = () => {};
    const watching = kpngWatch(server.addresses[0]!, "n1", steps.length + 1, {}, (n) => {
      received = n;
      onReceived();
    });
    const receivedAtLeast = (n: number) =>
      new Promise<void>((resolve) => {
        onReceived = () => received >= n && resolve();
        onReceived();
      });
    for (const [i, step] of steps.entries()) {
      await receivedAtLeast(i + 1);
      step();
    }
    const changeSets = await watching;
    const held = new Set<string>();
    changeSets.forEach((ops, i) => {
      const grammar = ops.map((o) => ({ Reset: "R", Set: "S", Delete: "D", Sync: "Y" })[o.op]).join("");
      assert.match(
        grammar,
        i === 0 ? /^R[SD]*Y$/ : /^[SD]*Y$/,
        `change set ${i}: ${grammar}`.replace("Y", "Sync"),
      );
      const body = ops.filter((o) => o.op === "Set" || o.op === "Delete");
      assert.ok(body.length > 0, "no empty change set after the first");
      const ranks = body.map(rank);
      assert.deepEqual(ranks, [...ranks].sort(), `change set ${i} in kpng's order`);
      for (const o of body) {
        if (o.op === "Set") held.add(o.path!);
        else assert.ok(held.delete(o.path!), `${o.path} deleted only after it was set`);
      }
      assert.equal(ops.at(-1)!.op, "Sync");
    });
    assert.deepEqual([...held].sort(), ["default/d"], "the client holds exactly the final state");
  } finally {
    await server.stop();
  }
});

test("serviceChanges without a shared log: the previous value of exactly the services that differ", () => {
  const [a, b, c, b2] = [service("a"), service("b"), service("c"), service("b")];
  const rows: {
    name: string;
    before: (typeof a)[];
    after: (typeof a)[];
    changed: [string, typeof a | undefined][];
  }[] = [
    { name: "same objects: nothing", before: [a, b], after: [a, b], changed: [] },
    { name: "a replaced value: its old one", before: [a, b], after: [a, b2], changed: [["default/b", b]] },
    {
      name: "an added service: undefined before",
      before: [a],
      after: [a, c],
      changed: [["default/c", undefined]],
    },
    { name: "a removed service: its old value", before: [a, b], after: [a], changed: [["default/b", b]] },
    { name: "another order: still by key", before: [a, b], after: [b2, a], changed: [["default/b", b]] },
    {
      name: "removed and added at once",
      before: [a, b],
      after: [a, c],
      changed: [
        ["default/b", b],
        ["default/c", undefined],
      ],
    },
  ];
  for (const row of rows) {
    const got = serviceChanges(localState("n", 1, row.before), localState("n", 2, row.after));
    const sorted = [...got].map(([k, before]) => [k, before]).sort(([x], [y]) => (x! < y! ? -1 : 1));
    assert.deepEqual(sorted, row.changed, row.name);
    for (const [k, v] of sorted)
      assert.equal(v, row.changed.find(([rk]) => rk === k)?.[1], `${row.name}: identity`);
  }
});
