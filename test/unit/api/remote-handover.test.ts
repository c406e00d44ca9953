// The handover of a relabelled Service between backends that watch the brain over the API: the
// losing backend keeps it until the gaining backend on the same node reports a sync whose state
// holds it (WatchReq.Programmed), as backends in one process do.

import assert from "node:assert/strict";
import { test } from "node:test";
import { NodeStates } from "../../../src/api/local-hub.ts";
import { eventually } from "../../support/eventually.ts";
import { localState, service } from "./fixtures.ts";
import { handoverFallbacks, quiet, remoteHandoverBrain } from "./remote-handover-fixture.ts";

const WEB = "ns/web";

test("the losing remote backend keeps a relabelled Service until the gaining one reports a sync holding it", async () => {
  const brain = await remoteHandoverBrain();
  try {
    const { plain, legacy, fallbacksBefore } = await brain.beginHandover();
    plain.sync();
    await quiet();
    assert.ok(plain.holds(WEB), "the losing backend dropped web before any confirmation");

    legacy.sync();
    await eventually(async () => !plain.holds(WEB), "the losing backend to drop web once confirmed");
    assert.ok(legacy.holds(WEB));

    // And back, the other way round.
    brain.relabel(undefined);
    await eventually(async () => plain.holds(WEB), "web back with the unlabelled backend");
    await quiet();
    assert.ok(legacy.holds(WEB));
    plain.sync();
    await eventually(async () => !legacy.holds(WEB), "the legacy backend to drop web once confirmed");
    assert.equal(await handoverFallbacks(), fallbacksBefore, "no fallback when confirmed");
  } finally {
    await brain.close();
  }
});

test("only the gaining backend of the same node confirms: another node's report releases nothing there", async () => {
  const brain = await remoteHandoverBrain();
  try {
    const plain = await brain.backend("", "n1");
    const legacy = await brain.backend("legacy", "n1");
    const legacyOfN2 = await brain.backend("legacy", "n2");
    brain.relabel("legacy");
    await eventually(
      async () => legacy.holds(WEB) && legacyOfN2.holds(WEB),
      "both nodes' gainers to get web",
    );
    legacyOfN2.sync();
    // A sync report of a state before the relabel confirms nothing either.
    await quiet();
    assert.ok(plain.holds(WEB), "n2's report released n1's Service");
    legacy.sync();
    await eventually(async () => !plain.holds(WEB), "n1's loser to drop web once n1's gainer confirms");
  } finally {
    await brain.close();
  }
});

test("a node without a backend for the new name drops the Service at once: it leaves this node's proxies", async () => {
  const brain = await remoteHandoverBrain();
  try {
    const plain = await brain.backend("");
    brain.relabel("nobody-here");
    await eventually(async () => !plain.holds(WEB), "web to leave at once");
    assert.equal(brain.clock.pending, 0, "no handover waiting");
  } finally {
    await brain.close();
  }
});

test("a report names a revision: the Services of that state, not of the latest, are what it confirms", () => {
  let r = 0;
  const states = new NodeStates("n1", () => ++r, { maxRevisions: 10, maxEntries: 1000 });
  const web = service("web");
  const old = service("old");
  states.push(localState("n1", 1, [web]));
  const before = states.revision!;
  states.push(localState("n1", 2, [web, old]));
  const withOld = states.revision!;
  const webChanged = service("web", { clusterIPs: ["198.51.100.20"] });
  states.push(localState("n1", 3, [webChanged]));
  assert.equal(states.servicesAt(before)?.get("default/old"), undefined, "old was not there yet");
  assert.equal(states.servicesAt(before)?.get("default/web"), web);
  assert.equal(states.servicesAt(withOld)?.get("default/old"), old);
  assert.equal(states.servicesAt(withOld)?.get("default/web"), web);
  assert.equal(states.servicesAt(states.revision!)?.get("default/web"), webChanged);
  assert.equal(states.servicesAt(states.revision!)?.get("default/old"), undefined);
  assert.equal(states.servicesAt(999), undefined, "a revision never served here");
});
