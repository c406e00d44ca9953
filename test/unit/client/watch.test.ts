import assert from "node:assert/strict";
import http2 from "node:http2";
import { connect, createServer, type Server, type Socket } from "node:net";
import { describe, test } from "node:test";
import { ApiServer } from "../../../src/api/server.ts";
import { WATCH_FLOW_CONTROL_WINDOW, type WireChangeSet, watchLocal } from "../../../src/client/watch.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { eventually } from "../../support/eventually.ts";
import { FakeBrain, service } from "../api/fixtures.ts";

/** A TCP relay on a fixed port: cutting it breaks every connection, as a network failure does. */
class Relay {
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  port = 0;
  upstream = 0;

  async open(): Promise<void> {
    const server = createServer((client) => {
      const server = connect(this.upstream, "127.0.0.1");
      for (const s of [client, server]) {
        this.#sockets.add(s);
        s.on("close", () => this.#sockets.delete(s));
        s.on("error", () => {});
      }
      client.pipe(server).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(this.port, "127.0.0.1", resolve));
    this.port = (server.address() as { port: number }).port;
    this.#server = server;
  }

  cut(): void {
    this.#server?.close();
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
  }
}

async function startServer(brain: FakeBrain, instanceId: string): Promise<ApiServer> {
  const server = new ApiServer({
    listen: ["tcp://127.0.0.1:0"],
    localFeed: brain.feed,
    log: silentLogger,
    instanceId,
  });
  await server.start();
  return server;
}

const portOf = (server: ApiServer) => Number(server.addresses[0]!.split(":").at(-1));

/** Resolves with the next value pushed; values pushed earlier wait in order. */
class Queue<T> {
  readonly #items: T[] = [];
  #waiter: ((v: T) => void) | undefined;
  push(v: T): void {
    if (this.#waiter !== undefined) {
      const w = this.#waiter;
      this.#waiter = undefined;
      w(v);
    } else this.#items.push(v);
  }
  next(): Promise<T> {
    const v = this.#items.shift();
    if (v !== undefined) return Promise.resolve(v);
    return new Promise((resolve) => {
      this.#waiter = resolve;
    });
  }
}

const paths = (cs: WireChangeSet) => cs.ops.map((o) => `${o.op} ${o.path}`);

describe("watch client: reconnect, backoff, resume", () => {
  test("a broken connection to the same server resumes with the delta; a new instance resets", async () => {
    const brain = new FakeBrain();
    brain.update("n1", [service("a"), service("b")]);
    let server = await startServer(brain, "first");
    const relay = new Relay();
    relay.upstream = portOf(server);
    await relay.open();

    const changeSets = new Queue<WireChangeSet>();
    const waits: number[] = [];
    const disconnects = new Queue<string>();
    const stop = new AbortController();
    // The injected sleep records each backoff wait and lets the test decide when it ends.
    let releaseWait: (() => void) | undefined;
    const watching = watchLocal("n1", {
      api: `tcp://127.0.0.1:${relay.port}`,
      signal: stop.signal,
      onChangeSet: (cs) => changeSets.push(cs),
      onDisconnect: (err) => disconnects.push(err.message),
      backoff: { initialMs: 100, maxMs: 400 },
      timing: {
        random: () => 0,
        sleep: (ms, signal) => {
          waits.push(ms);
          return new Promise((resolve) => {
            releaseWait = resolve;
            signal.addEventListener("abort", () => resolve(), { once: true });
          });
        },
      },
    });
    // Releases backoff waits (the channel may need a few attempts) until a change set arrives.
    const nextChangeSet = async () => {
      const next = changeSets.next();
      let done = false;
      void next.then(() => {
        done = true;
      });
      const deadline = Date.now() + 30_000;
      while (!done) {
        assert.ok(Date.now() < deadline, "no change set within 30 s");
        releaseWait?.();
        releaseWait = undefined;
        await new Promise((r) => setTimeout(r, 5));
      }
      return next;
    };
    const waitReleased = async () => {
      await eventually(async () => releaseWait !== undefined, "the client to wait", 30_000, 5);
      const release = releaseWait;
      releaseWait = undefined;
      assert.ok(release, "the client is waiting");
      release();
    };
    try {
      const first = await changeSets.next();
      assert.equal(first.reset, true);
      assert.equal(first.instanceId, "first");

      // The network breaks; the client keeps failing while it is down, waiting longer each time.
      relay.cut();
      await disconnects.next();
      brain.update("n1", [service("b", { clusterIPs: ["198.51.100.20"] })]);
      for (let i = 0; i < 3; i++) {
        await waitReleased();
        await disconnects.next();
      }
      assert.deepEqual(waits, [100, 200, 400, 400], "doubling, capped at maxMs");

      // Back up: same server instance, so only what changed meanwhile arrives.
      await relay.open();
      const resumed = await nextChangeSet();
      assert.equal(resumed.reset, false);
      assert.deepEqual(paths(resumed), ["set default/b"]);
      assert.ok(resumed.revision > first.revision);

      // A restarted brain (new instance) behind the same address: Reset and everything.
      const waited = waits.length;
      server.forceStop();
      await disconnects.next();
      await eventually(async () => waits.length > waited, "the client to back off", 30_000, 5);
      assert.equal(waits[waited], 100, "a stream that made progress starts the backoff again");
      server = await startServer(brain, "second");
      relay.upstream = portOf(server);
      const reset = await nextChangeSet();
      assert.equal(reset.reset, true);
      assert.equal(reset.instanceId, "second");
      assert.deepEqual(paths(reset), [
        "set default/a",
        "set default/b",
        "set default/a/192.0.2.1",
        "set default/b/192.0.2.1",
      ]);
    } finally {
      stop.abort();
      releaseWait?.();
      await watching;
      relay.cut();
      await server.stop();
    }
  });
});

test("a watch client offers a flow-control window the size of a large first state, per stream and per connection", async () => {
  // With HTTP/2's default 64 KiB, the server stops every 64 KiB of a full state to wait for the
  // client's window update. Seen from the server: the window the client's settings give each
  // stream, and the connection's window once the client has raised it.
  const server = http2.createServer();
  const sessions: http2.Http2Session[] = [];
  server.on("stream", (stream) => sessions.push(stream.session!));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const stop = new AbortController();
  const watching = watchLocal("n1", {
    api: `tcp://127.0.0.1:${(server.address() as { port: number }).port}`,
    signal: stop.signal,
    onChangeSet: () => {},
  });
  try {
    await eventually(
      async () => sessions[0]?.state.remoteWindowSize === WATCH_FLOW_CONTROL_WINDOW,
      "the client's connection window",
      5_000,
      20,
    );
    assert.equal(sessions[0]!.remoteSettings.initialWindowSize, WATCH_FLOW_CONTROL_WINDOW, "per stream");
    assert.ok(WATCH_FLOW_CONTROL_WINDOW >= 4 * 1024 * 1024);
  } finally {
    stop.abort();
    await watching;
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => server.close(() => resolve(undefined)));
  }
});
