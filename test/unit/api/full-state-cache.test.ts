// The first full state to many clients is encoded once per distinct state and revision, not once
// per client; what is held stays within its byte bound; resume still sends only the delta.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type Frame, resetFrame, setFrame } from "../../../src/api/frames.ts";
import { FullStateCache } from "../../../src/api/full-state-cache.ts";
import { Set as WireSet } from "../../../src/api/gen/api/localv1/api.ts";
import { GlobalStates } from "../../../src/api/global-hub.ts";
import { type FullStateEncoder, LocalStateHub, type NodeStates } from "../../../src/api/local-hub.ts";
import { RevisionSession } from "../../../src/api/revision-session.ts";
import type { ChangeSet } from "../../../src/api/watch-stream.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import { settle } from "../../support/settle.ts";
import { FakeBrain, service } from "./fixtures.ts";

const INSTANCE = "server-1";

/** An encoder that counts its calls: one Set op per service, path = key. */
function countingEncoder(): { encode: FullStateEncoder; calls: () => number } {
  let calls = 0;
  return {
    encode: (services) => {
      calls++;
      return [...services.keys()].map((key) => setFrame(WireSet.ServicesSet, key, Buffer.from(key)));
    },
    calls: () => calls,
  };
}

interface Client {
  readonly session: RevisionSession<{ NodeName: string; InstanceID: string; Revision: number }>;
  next(instanceId?: string, revision?: number): Promise<ChangeSet>;
}

function client(hub: LocalStateHub, node: string): Client {
  let states: NodeStates | undefined;
  const session = new RevisionSession<{ NodeName: string; InstanceID: string; Revision: number }>(
    INSTANCE,
    (req) => {
      states ??= hub.acquire(req.NodeName);
      return states;
    },
    () => {
      if (states !== undefined) hub.release(states);
    },
  );
  return {
    session,
    next: async (instanceId = "", revision = 0) => {
      const changes = await session.next(
        { NodeName: node, InstanceID: instanceId, Revision: revision },
        new AbortController().signal,
      );
      assert.ok(changes !== undefined);
      return changes;
    },
  };
}

/** The frames between a change set's Reset and Sync: the full state itself. */
const body = (changes: ChangeSet): readonly Frame[] => changes.frames.slice(1, -1);

describe("full states shared between clients", () => {
  test("1,000 clients of one node at one revision: one encoding, the same frames for all", async () => {
    const brain = new FakeBrain();
    const encoder = countingEncoder();
    const hub = new LocalStateHub(brain.feed, { encodeFullState: encoder.encode });
    brain.update("n1", [service("web"), service("db")]);
    const clients = Array.from({ length: 1000 }, () => client(hub, "n1"));
    const first = await Promise.all(clients.map((c) => c.next()));
    assert.equal(encoder.calls(), 1);
    for (const changes of first) assert.equal(body(changes)[0], body(first[0]!)[0]);

    // A new revision: the next clients that start over get it encoded once more, once.
    brain.update("n1", [service("cache")]);
    await settle();
    const later = Array.from({ length: 1000 }, () => client(hub, "n1"));
    await Promise.all(later.map((c) => c.next()));
    assert.equal(encoder.calls(), 2);
    hub.close();
  });

  test("a client resuming from a known revision gets the delta, not the full state", async () => {
    const brain = new FakeBrain();
    const encoder = countingEncoder();
    const hub = new LocalStateHub(brain.feed, { encodeFullState: encoder.encode });
    brain.update("n1", [service("web")]);
    const first = client(hub, "n1");
    await first.next();
    const revision = hub.acquire("n1").revision!;
    brain.update("n1", [service("db")]);
    await settle();
    const resumed = await client(hub, "n1").next(INSTANCE, revision);
    assert.equal(encoder.calls(), 1);
    assert.ok(!resumed.frames[0]!.equals(resetFrame(INSTANCE)), "a resumed stream starts without a Reset");
    hub.close();
  });

  test("globalv1: every client of one flavor at one revision gets the one encoding", async () => {
    const store = new ClusterStore();
    store.upsert({
      kind: "ServiceCIDR",
      metadata: {
        namespace: "",
        name: "kubernetes",
        uid: "",
        resourceVersion: "",
        labels: {},
        annotations: {},
      },
      cidrs: ["198.51.100.0/24"],
    });
    store.synced();
    await settle();
    let revision = 0;
    const hub = new GlobalStates(store, () => ++revision);
    const view = hub.view("objects");
    const first = view.allFrames();
    assert.equal(view.allFrames(), first);
    assert.equal(hub.view("objects").allFrames(), first);
    assert.notEqual(hub.view("kpng").allFrames(), first);
    store.upsert({
      kind: "ServiceCIDR",
      metadata: { namespace: "", name: "more", uid: "", resourceVersion: "", labels: {}, annotations: {} },
      cidrs: ["203.0.113.0/24"],
    });
    await settle();
    assert.notEqual(view.allFrames(), first);
    hub.close();
  });

  test("distinct states are encoded once each, and the held bytes stay within the bound", () => {
    let calls = 0;
    const frameOf = (bytes: number): Frame[] => {
      calls++;
      return [Buffer.alloc(bytes)];
    };
    const cache = new FullStateCache(1000);
    const states = Array.from({ length: 5 }, () => ({}));
    for (const s of states) cache.frames(s, 1, () => frameOf(300));
    assert.equal(calls, 5);
    assert.ok(cache.bytes <= 1000, `held ${cache.bytes} bytes`);
    // The most recent three are held; asking again for them encodes nothing.
    for (const s of states.slice(2)) cache.frames(s, 1, () => frameOf(300));
    assert.equal(calls, 5);
    // A new revision of a state is a new encoding; forgetting releases its bytes.
    cache.frames(states[4]!, 2, () => frameOf(300));
    assert.equal(calls, 6);
    cache.forget(states[4]!);
    assert.equal(cache.bytes, 600);
    // A state larger than the bound is encoded, served, and not held.
    const big = {};
    assert.equal(cache.frames(big, 1, () => frameOf(5000))[0]!.length, 5000);
    assert.equal(cache.bytes, 600);
  });
});
