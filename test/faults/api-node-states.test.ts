// Fault: the watch API could be driven out of memory: 300 streams with distinct node names took
// the server from 241 MB to 3.0 GB, any string was a node name, and each node's state lingered 5
// minutes after its stream ended.

import assert from "node:assert/strict";
import type * as http2 from "node:http2";
import { connect } from "node:http2";
import { describe, test } from "node:test";
import { ApiServer } from "../../src/api/server.ts";
import { isValidNodeName } from "../../src/api/stream-rejection.ts";
import { silentLogger } from "../../src/observability/log.ts";
import { FakeBrain, service } from "../unit/api/fixtures.ts";
import { kpngWatch } from "../unit/api/kpng-client.ts";
import { capturingLogger, eventually } from "./support.ts";

const RESOURCE_EXHAUSTED = 8;
const INVALID_ARGUMENT = 3;

async function serve(maxNodes: number) {
  const brain = new FakeBrain();
  const server = new ApiServer({
    listen: ["tcp://127.0.0.1:0"],
    localFeed: brain.feed,
    log: silentLogger,
    hub: { maxNodes },
  });
  await server.start();
  return { brain, server, target: server.addresses[0]! };
}

describe("fault: the watch API grows without bound", () => {
  test("at the cap, a stream for one more node is refused while every node is watched", {
    timeout: 20_000,
  }, async () => {
    const { brain, server, target } = await serve(3);
    const held: Promise<unknown>[] = [];
    try {
      for (const n of ["n1", "n2", "n3"]) {
        brain.update(n, [service("a")]);
        // Two change sets: the stream stays open waiting for the second.
        held.push(kpngWatch(target, n, 2).catch(() => undefined));
      }
      await eventually(() => server.nodeCount === 3, "three watched nodes");
      await assert.rejects(kpngWatch(target, "n4", 1), (e: Error & { code?: number }) => {
        assert.equal(e.code, RESOURCE_EXHAUSTED);
        assert.match(e.message, /already serving 3 nodes/);
        return true;
      });
      assert.equal(server.nodeCount, 3);
    } finally {
      server.forceStop();
      await Promise.all(held);
    }
  });

  test("idle node states give way to new ones at the cap instead of lingering", {
    timeout: 20_000,
  }, async () => {
    const { brain, server, target } = await serve(5);
    try {
      for (let i = 0; i < 20; i++) {
        brain.update(`node-${i}`, [service("a")]);
        await kpngWatch(target, `node-${i}`, 1);
      }
      assert.ok(server.nodeCount <= 5, `${server.nodeCount} node states held`);
    } finally {
      await server.stop();
    }
  });

  test("a node name that no Node could have is refused", { timeout: 20_000 }, async () => {
    const { server, target } = await serve(10);
    try {
      for (const bad of ["", "UPPER", "x".repeat(300), "a/b", "-lead"]) {
        await assert.rejects(kpngWatch(target, bad, 1), (e: Error & { code?: number }) => {
          assert.equal(e.code, INVALID_ARGUMENT, bad);
          return true;
        });
      }
      assert.equal(server.nodeCount, 0);
    } finally {
      await server.stop();
    }
  });

  test("one connection may open at most 100 streams at once (HTTP/2 settings)", {
    timeout: 20_000,
  }, async () => {
    const { server, target } = await serve(10);
    const session = connect(`http://${target}`);
    try {
      const settings = await new Promise<http2.Settings>((resolve) =>
        session.once("remoteSettings", resolve),
      );
      assert.equal(settings.maxConcurrentStreams, 100);
    } finally {
      session.destroy();
      await server.stop();
    }
  });

  test("isValidNodeName: DNS subdomains of at most 253 characters", () => {
    const cases: [string, boolean][] = [
      ["node-1", true],
      ["ip-10-0-0-1.ec2.internal", true],
      ["a", true],
      [`${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(61)}`, true],
      ["a".repeat(254), false],
      ["", false],
      ["Node", false],
      ["node_1", false],
      ["node-", false],
      ["a..b", false],
    ];
    for (const [name, valid] of cases) assert.equal(isValidNodeName(name), valid, name);
  });
});

test("fault: 200 refused watch streams log a few lines, not 200", { timeout: 30_000 }, async () => {
  const { log, lines } = capturingLogger();
  const brain = new FakeBrain();
  const server = new ApiServer({
    listen: ["tcp://127.0.0.1:0"],
    localFeed: brain.feed,
    log,
    hub: { maxNodes: 10 },
  });
  await server.start();
  try {
    for (let i = 0; i < 200; i++) await kpngWatch(server.addresses[0]!, "UPPER", 1).catch(() => undefined);
    const refused = lines.filter((l) => l.msg === "watch request refused");
    assert.ok(refused.length > 0 && refused.length <= 10, `${refused.length} lines`);
  } finally {
    await server.stop();
  }
});
