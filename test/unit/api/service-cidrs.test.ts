// The Service IP ranges on the localv1 wire: one ServiceCIDRsSet value, in full states and in
// deltas (resume included), decoded by the client library into LocalState.serviceCIDRs.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setImmediate as nextMacrotask } from "node:timers/promises";
import type { Frame } from "../../../src/api/frames.ts";
import { ServiceCIDRs, Set as WireSet } from "../../../src/api/gen/api/localv1/api.ts";
import { GlobalStates } from "../../../src/api/global-hub.ts";
import { NodeStates } from "../../../src/api/local-hub.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import { LocalStateDecoder } from "../../../src/client/decoder.ts";
import type { WireChangeSet } from "../../../src/client/watch.ts";
import type { ServiceCIDR } from "../../../src/model/kube.ts";
import type { LocalState } from "../../../src/model/local.ts";
import { GlobalChangeApplier } from "../../../src/sources/api/api-source.ts";
import { localState, service, wireOps } from "./fixtures.ts";

const ops = wireOps;

const rangeOps = (frames: readonly Frame[]) =>
  ops(frames)
    .filter((o) => o.set === WireSet.ServiceCIDRsSet)
    .map((o) =>
      o.op === "set" ? `set ${o.path} ${ServiceCIDRs.decode(o.bytes).CIDRs.join(",")}` : `delete ${o.path}`,
    );

const withRanges = (s: LocalState, serviceCIDRs: string[]): LocalState => ({ ...s, serviceCIDRs });

describe("Service ranges on the wire", () => {
  const web = service("web");
  const s1 = withRanges(localState("n1", 1, [web]), ["198.51.100.0/24", "2001:db8:1::/112"]);

  test("a full state carries the ranges first; none when there are none", () => {
    const hub = new NodeStates(
      "n1",
      (() => {
        let r = 0;
        return () => ++r;
      })(),
      10,
      1000,
    );
    hub.push(s1);
    assert.deepEqual(rangeOps(hub.allFrames()), ["set service-cidrs 198.51.100.0/24,2001:db8:1::/112"]);
    assert.equal(ops(hub.allFrames())[0]!.set, WireSet.ServiceCIDRsSet);
    const empty = new NodeStates("n2", () => 1, 10, 1000);
    empty.push(localState("n2", 1, [web]));
    assert.deepEqual(rangeOps(empty.allFrames()), []);
  });

  test("a change of ranges alone is a change set of its own; resume from before it gets it", () => {
    let r = 0;
    const hub = new NodeStates("n1", () => ++r, 10, 1000);
    hub.push(s1);
    const first = hub.revision!;
    const s2 = { ...s1, revision: 2, serviceCIDRs: ["198.51.100.0/24"] };
    hub.push(s2);
    assert.notEqual(hub.revision, first);
    assert.deepEqual(rangeOps(hub.framesSince(first)!), ["set service-cidrs 198.51.100.0/24"]);
    assert.equal(ops(hub.framesSince(first)!).length, 1, "services are not resent");
    const second = hub.revision!;
    hub.push({ ...s2, revision: 3, serviceCIDRs: [] });
    assert.deepEqual(rangeOps(hub.framesSince(second)!), ["delete service-cidrs"]);
    // Resuming from the first revision: the ranges are those of now.
    assert.deepEqual(rangeOps(hub.framesSince(first)!), ["delete service-cidrs"]);
    // The same state object again is no new revision.
    const now = hub.revision;
    hub.push({
      ...s2,
      revision: 3,
      serviceCIDRs: hub.current!.state.serviceCIDRs,
      services: hub.current!.state.services,
    });
    assert.equal(hub.revision, now);
  });

  test("the client library decodes them; a Reset without them clears them", () => {
    let r = 0;
    const hub = new NodeStates("n1", () => ++r, 10, 1000);
    hub.push(s1);
    const decoder = new LocalStateDecoder("n1");
    const full: WireChangeSet = { reset: true, ops: ops(hub.allFrames()), instanceId: "i", revision: 1 };
    const a = decoder.apply(full);
    assert.equal(a.changed, true);
    assert.deepEqual(a.state.serviceCIDRs, ["198.51.100.0/24", "2001:db8:1::/112"]);
    assert.equal(a.state.services.size, 1);
    const first = hub.revision!;
    hub.push({ ...s1, revision: 2, serviceCIDRs: ["203.0.113.0/24"] });
    const b = decoder.apply({
      reset: false,
      ops: ops(hub.framesSince(first)!),
      instanceId: "i",
      revision: 2,
    });
    assert.equal(b.changed, true);
    assert.deepEqual(b.state.serviceCIDRs, ["203.0.113.0/24"]);
    assert.equal(
      b.state.services.get("default/web"),
      a.state.services.get("default/web"),
      "the service is kept",
    );
    const c = decoder.apply({
      reset: true,
      ops: ops(hub.allFrames()).filter((o) => o.set !== WireSet.ServiceCIDRsSet),
      instanceId: "i",
      revision: 3,
    });
    assert.deepEqual(c.state.serviceCIDRs, []);
  });
});

describe("ServiceCIDRs on globalv1", () => {
  const range = (name: string, cidrs: string[]): ServiceCIDR => ({
    kind: "ServiceCIDR",
    metadata: { namespace: "", name, uid: "", resourceVersion: "", labels: {}, annotations: {} },
    cidrs,
  });

  test("a replicating brain gets the objects, their changes and deletions; kpng clients get none", async () => {
    const source = new ClusterStore();
    source.upsert(range("kubernetes", ["198.51.100.0/24", "2001:db8:1::/112"]));
    source.synced();
    await nextMacrotask();
    let r = 0;
    const hub = new GlobalStates(source, () => ++r);
    const objects = hub.view("objects");
    assert.deepEqual(
      ops(hub.view("kpng").allFrames()).filter((o) => o.set === WireSet.GlobalServiceCIDRs),
      [],
    );
    const replica = new ClusterStore();
    const applier = new GlobalChangeApplier(replica);
    applier.apply({ reset: true, ops: ops(objects.allFrames()), instanceId: "i", revision: 1 });
    assert.deepEqual(replica.serviceCIDRs(), ["198.51.100.0/24", "2001:db8:1::/112"]);

    const first = hub.revision!;
    source.upsert(range("more", ["203.0.113.0/24"]));
    source.delete("ServiceCIDR", "kubernetes");
    await nextMacrotask();
    const delta = ops(objects.framesSince(first)!);
    assert.deepEqual(
      delta.map((o) => `${o.op} ${o.path}`),
      ["set |more||", "delete |kubernetes||"],
    );
    applier.apply({ reset: false, ops: delta, instanceId: "i", revision: 2 });
    assert.deepEqual(replica.serviceCIDRs(), ["203.0.113.0/24"]);
    hub.close();
  });
});
