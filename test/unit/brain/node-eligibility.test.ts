import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setImmediate as nextMacrotask } from "node:timers/promises";
import { LocalStateTracker } from "../../../src/brain/local-state-tracker.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import { readNode } from "../../../src/model/validate-node.ts";
import { ep, node, slice, svc } from "./fixtures.ts";

describe("node eligibility in the local state (/healthz)", () => {
  test("unknown node: not eligible; known: eligible; being deleted: not, with the same revision", async () => {
    const store = new ClusterStore();
    store.upsert(svc({ name: "web" }));
    store.upsert(slice([ep("203.0.113.1", { node: "n1" })], { service: "web" }));
    const tracker = new LocalStateTracker(store, "n1");
    store.subscribe((c) => tracker.update(c));
    store.synced();
    await nextMacrotask();
    assert.equal(tracker.state.nodeEligible, false);
    store.upsert(node("n1"));
    await nextMacrotask();
    const eligible = tracker.state;
    assert.equal(eligible.nodeEligible, true);
    store.upsert({ ...node("n1"), beingDeleted: true });
    await nextMacrotask();
    assert.equal(tracker.state.nodeEligible, false);
    assert.equal(tracker.state.revision, eligible.revision, "eligibility programs nothing");
    assert.notEqual(tracker.state, eligible, "but it is a new state, so sinks see it");
  });

  test("readNode: deletionTimestamp or the autoscaler's taint mark the node as being deleted", () => {
    const raw = (extra: object) => ({ apiVersion: "v1", kind: "Node", metadata: { name: "n1" }, ...extra });
    assert.equal(readNode(raw({})).beingDeleted, undefined);
    assert.equal(
      readNode({ ...raw({}), metadata: { name: "n1", deletionTimestamp: "2026-01-01T00:00:00Z" } })
        .beingDeleted,
      true,
    );
    const taint = { key: "ToBeDeletedByClusterAutoscaler", value: "1", effect: "NoSchedule" };
    assert.equal(readNode(raw({ spec: { taints: [taint] } })).beingDeleted, true);
    assert.equal(readNode(raw({ spec: { taints: [{ ...taint, key: "other" }] } })).beingDeleted, undefined);
  });
});
