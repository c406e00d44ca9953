// Fault: the node's HTTP servers had no bound on what a client could take. 1,100 idle
// connections exhausted kpng's descriptors (see health-port-flood.test.ts); 50 keep-alive clients
// pipelining /livez used both cores and a separate probe timed out, so a kubelet would have
// restarted kpng. Now: a connection cap answered 503, an idle deadline, and a request budget
// per connection.

import assert from "node:assert/strict";
import type { Server } from "node:http";
import { connect, type Socket } from "node:net";
import { after, describe, test } from "node:test";
import { close, listen } from "../../src/observability/http-listen.ts";

const LIMITS = { maxConnections: 8, idleMs: 500, headersMs: 500, requestsPerSecond: 20 };

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: "127.0.0.1", port }, () => resolve(s));
    s.on("error", reject);
  });
}

/** Everything the server sends until it closes the connection (or `ms` pass). */
function received(s: Socket, ms = 3000): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    let text = "";
    s.setEncoding("utf8").on("data", (t: string) => {
      text += t;
    });
    const timer = setTimeout(() => resolve({ text, closed: false }), ms);
    s.on("close", () => {
      clearTimeout(timer);
      resolve({ text, closed: true });
    });
  });
}

describe("fault: HTTP clients cannot starve kpng", () => {
  let server: Server;
  let port = 0;
  const sockets: Socket[] = [];
  after(async () => {
    for (const s of sockets) s.destroy();
    await close(server);
  });

  test("past the connection cap, a connection is answered 503 and closed", async () => {
    server = await listen("127.0.0.1", 0, (_req, res) => res.end("ok"), LIMITS);
    port = (server.address() as { port: number }).port;
    for (let i = 0; i < LIMITS.maxConnections; i++) sockets.push(await open(port));
    const extra = await open(port);
    const r = await received(extra);
    assert.ok(r.closed);
    assert.match(r.text, /^HTTP\/1\.1 503 /);
  });

  test("idle connections are closed, freeing their places", async () => {
    const closed = await Promise.all(sockets.map((s) => received(s, 3000)));
    assert.ok(closed.every((r) => r.closed));
    const s = await open(port);
    s.write("GET /livez HTTP/1.1\r\nHost: x\r\n\r\n");
    assert.match((await received(s, 1000)).text, /^HTTP\/1\.1 200 /);
    s.destroy();
  });

  test("a connection pipelining 200 requests gets its budget, then 503 and close; a probe beside it is fast", async () => {
    const flood = await open(port);
    flood.write("GET /livez HTTP/1.1\r\nHost: x\r\n\r\n".repeat(200));
    const probe = await open(port);
    const started = performance.now();
    probe.write("GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const p = await received(probe);
    assert.match(p.text, /^HTTP\/1\.1 200 /);
    assert.ok(performance.now() - started < 1000);
    const r = await received(flood);
    assert.ok(r.closed);
    const answers = r.text.match(/HTTP\/1\.1 \d{3}/g) ?? [];
    assert.equal(answers.filter((a) => a.endsWith("200")).length, LIMITS.requestsPerSecond);
    assert.ok(answers.length < 200, `${answers.length} answers`);
  });
});
