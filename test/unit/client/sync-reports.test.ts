// The client's sync reports (localv1 WatchReq.Programmed) against a recording server: sent only
// to a server whose Sync says it reads them (one that predates them would take a report for a
// request of the next change set), each report naming the change set whose state was programmed,
// and sent again on a new stream after a reconnect.

import assert from "node:assert/strict";
import { test } from "node:test";
import { resetFrame, syncFrame } from "../../../src/api/frames.ts";
import { WatchReq } from "../../../src/api/gen/api/localv1/api.ts";
import { GrpcServer } from "../../../src/api/grpc-server.ts";
import type { GrpcServerCall } from "../../../src/api/grpc-stream.ts";
import { remoteLocalStateFeed } from "../../../src/client/feed.ts";
import type { LocalState } from "../../../src/model/local.ts";
import { eventually } from "../../support/eventually.ts";

/** A localv1 server that answers each stream's first request with an empty state (revision 7). */
async function recordingServer(readsProgrammed: boolean) {
  const server = new GrpcServer({ keepaliveMs: 30_000, keepaliveTimeoutMs: 10_000 });
  const requests: WatchReq[] = [];
  /** The first request of each stream. */
  const firsts: WatchReq[] = [];
  const calls: GrpcServerCall<WatchReq>[] = [];
  server.addMethod("/localv1.Sets/Watch", {
    decode: (b) => WatchReq.decode(b),
    handle: (call) => {
      calls.push(call);
      let first = true;
      call.onRequest((req) => {
        requests.push(req);
        if (!first) return;
        first = false;
        firsts.push(req);
        void call.write(
          [resetFrame("i1"), syncFrame("i1", 7, readsProgrammed)],
          new AbortController().signal,
        );
      });
    },
  });
  const port = await server.listen({ host: "127.0.0.1", port: 0 });
  return { server, requests, firsts, calls, api: `127.0.0.1:${port}` };
}

async function client(api: string) {
  const stop = new AbortController();
  const feed = remoteLocalStateFeed({ api, nodeName: "n1", serviceProxyName: "legacy", signal: stop.signal });
  let latest: LocalState | undefined;
  feed.subscribe((state) => {
    latest = state;
  });
  await eventually(async () => latest !== undefined, "the first state");
  return { feed, state: latest!, stop: () => stop.abort() };
}

const settle = () => new Promise((r) => setTimeout(r, 200));

test("a server that predates sync reports gets none: only the requests for change sets", async () => {
  const s = await recordingServer(false);
  const c = await client(s.api);
  try {
    c.feed.programmed?.(c.state, ["IPv4"]);
    await settle();
    await eventually(async () => s.requests.length === 2, "the request for the next change set");
    await settle();
    assert.equal(s.requests.length, 2);
    assert.ok(s.requests.every((r) => r.Programmed === undefined));
  } finally {
    c.stop();
    s.server.forceStop();
  }
});

test("a server that reads them gets each sync report, naming the change set programmed, again after a reconnect", async () => {
  const s = await recordingServer(true);
  const c = await client(s.api);
  try {
    assert.ok(
      s.requests.every((r) => r.ReportsProgrammed !== true),
      "no report yet: says nothing",
    );
    c.feed.programmed?.(c.state, ["IPv4"]);
    await eventually(async () => s.requests.some((r) => r.Programmed !== undefined), "a report");
    const reports = () => s.requests.filter((r) => r.Programmed !== undefined);
    assert.deepEqual(reports()[0]?.Programmed, { InstanceID: "i1", Revision: 7, Families: ["IPv4"] });
    assert.equal(reports()[0]?.NodeName, "n1");
    assert.equal(reports()[0]?.ServiceProxyName, "legacy");
    // A periodic resync of the same state is not sent again on the same stream.
    c.feed.programmed?.(c.state, ["IPv4"]);
    await settle();
    assert.equal(reports().length, 1);

    // The stream breaks: the new stream says the client reports syncs, and gets the report again.
    s.calls[0]!.destroy();
    await eventually(async () => s.calls.length === 2, "a new stream", 20_000);
    await eventually(async () => reports().length === 2, "the report again on the new stream");
    assert.equal(s.firsts[1]?.Revision, 7, "resumed");
    assert.equal(s.firsts[1]?.ReportsProgrammed, true);
  } finally {
    c.stop();
    s.server.forceStop();
  }
});
