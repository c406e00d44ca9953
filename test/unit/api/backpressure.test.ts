// A client that stops reading, or stops asking, while the brain keeps changing: the server keeps
// a bounded amount for its stream, and the client catches up with one coalesced change set.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { OpItem, WatchReq } from "../../../src/api/gen/api/localv1/api.ts";
import { ApiServer } from "../../../src/api/server.ts";
import { LocalStateDecoder } from "../../../src/client/decoder.ts";
import type { WireOp } from "../../../src/client/watch.ts";
import type { LocalService } from "../../../src/model/local.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { eventually } from "../../support/eventually.ts";
import { settle } from "../../support/settle.ts";
import { endpoint, FakeBrain, service, servicePort } from "./fixtures.ts";

const big = (i: number, shift = 0): LocalService =>
  service(`svc-${i}`, {
    ports: [
      servicePort({
        internalEndpoints: Array.from({ length: 10 }, (_, j) =>
          endpoint(`192.0.2.${j + shift}`, 8000 + (i % 1000)),
        ),
      }),
    ],
  });

/** A raw localv1 stream whose reading and asking the test controls. */
function rawWatch(target: string, node: string) {
  const client = new grpc.Client(target, grpc.credentials.createInsecure());
  const call = client.makeBidiStreamRequest<WatchReq, Buffer>(
    "/localv1.Sets/Watch",
    (r) => Buffer.from(WatchReq.encode(r).finish()),
    (b) => b,
  );
  call.on("error", () => {});
  const decoder = new LocalStateDecoder(node);
  const syncs: number[] = [];
  let reset = false;
  let ops: WireOp[] = [];
  call.on("data", (b: Buffer) => {
    const op = OpItem.decode(b).Op;
    if (op?.$case === "Reset") reset = true;
    else if (op?.$case === "Set")
      ops.push({ op: "set", set: op.value.Ref!.Set, path: op.value.Ref!.Path, bytes: op.value.Bytes });
    else if (op?.$case === "Delete") ops.push({ op: "delete", set: op.value.Set, path: op.value.Path });
    else if (op?.$case === "Sync") {
      decoder.apply({ reset, ops, instanceId: op.value.InstanceID, revision: op.value.Revision });
      syncs.push(op.value.Revision);
      reset = false;
      ops = [];
    }
  });
  return {
    call,
    decoder,
    syncs,
    ask: () => call.write({ NodeName: node, InstanceID: "", Revision: 0 }),
    close: () => {
      call.cancel();
      client.close();
    },
  };
}

const until = (cond: () => boolean, what: string) => eventually(async () => cond(), what, 30_000, 10);

const asJson = (services: ReadonlyMap<string, LocalService>) =>
  [...services.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, s]) => s);

describe("backpressure", () => {
  test("a client that stops reading holds a bounded buffer and catches up in one change set", async () => {
    const brain = new FakeBrain();
    brain.update(
      "n1",
      Array.from({ length: 3000 }, (_, i) => big(i)),
    );
    const server = new ApiServer({ listen: ["tcp://127.0.0.1:0"], localFeed: brain.feed, log: silentLogger });
    await server.start();
    const w = rawWatch(server.addresses[0]!, "n1");
    try {
      w.call.pause();
      w.ask();
      // The full state (~3 MB) cannot fit in HTTP/2's windows: the server stops mid-change-set.
      await until(() => (server.streams()[0]?.frames ?? 0) > 0, "the server waits for the client");
      // Settled: the count has not moved for three samples in a row (on a loaded machine filling
      // the windows takes a while).
      let settled = -1;
      let still = 0;
      const deadline = Date.now() + 30_000;
      while (still < 3 && Date.now() < deadline) {
        const frames = server.streams()[0]!.frames;
        still = frames === settled ? still + 1 : 0;
        settled = frames;
        await new Promise((r) => setTimeout(r, 200));
      }
      const stalled = server.streams()[0]!;
      let maxBytes = 0;
      for (let round = 0; round < 100; round++) {
        brain.update("n1", [big(round, 100)]);
        await new Promise((r) => setImmediate(r));
        const now = server.streams()[0]!;
        maxBytes = Math.max(maxBytes, now.bytes);
        assert.equal(now.frames, stalled.frames, "nothing more is queued for the stalled stream");
      }
      assert.ok(maxBytes <= 256 * 1024, `HTTP/2 holds at most a batch and its buffer (${maxBytes} B)`);
      assert.equal(w.syncs.length, 0);

      w.call.resume();
      await until(() => w.syncs.length === 1, "the first change set completes");
      w.ask();
      await until(() => w.syncs.length === 2, "one change set brings the client up to date");
      await settle();
      assert.deepEqual(server.streams()[0], { frames: 0, bytes: 0 }, "no further change set was queued");
      assert.equal(w.syncs.length, 2);
      assert.deepEqual(asJson(w.decoder.state.services), asJson(brain.state("n1")!.services));
    } finally {
      w.close();
      await server.stop();
    }
  });

  test("a client that stops asking costs nothing and gets one coalesced change set", async () => {
    const brain = new FakeBrain();
    brain.update(
      "n1",
      Array.from({ length: 50 }, (_, i) => big(i)),
    );
    const server = new ApiServer({ listen: ["tcp://127.0.0.1:0"], localFeed: brain.feed, log: silentLogger });
    await server.start();
    const w = rawWatch(server.addresses[0]!, "n1");
    try {
      w.ask();
      await until(() => w.syncs.length === 1, "first change set");
      for (let round = 0; round < 200; round++) {
        brain.update("n1", [big(round % 50, round)], round % 7 === 0 ? [`default/svc-${round % 50}`] : []);
        await new Promise((r) => setImmediate(r));
        assert.deepEqual(server.streams()[0], { frames: 0, bytes: 0 });
      }
      w.ask();
      await until(() => w.syncs.length === 2, "second change set");
      await settle();
      assert.deepEqual(server.streams()[0], { frames: 0, bytes: 0 }, "no further change set was queued");
      assert.equal(w.syncs.length, 2);
      assert.deepEqual(asJson(w.decoder.state.services), asJson(brain.state("n1")!.services));
    } finally {
      w.close();
      await server.stop();
    }
  });
});
