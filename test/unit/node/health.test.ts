import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { describe, test } from "node:test";
import { healthAnswer, startHealthServer } from "../../../src/node/health-server.ts";
import { ProxyHealth } from "../../../src/node/proxy-health.ts";
import { close } from "../../../src/observability/http-listen.ts";

function clock(start = Date.parse("2026-01-01T00:00:00Z")) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe("ProxyHealth", () => {
  test("healthy at start, while a change waits less than the timeout, and after a sync", () => {
    const c = clock();
    const h = new ProxyHealth({ families: ["IPv4"], timeoutMs: 60_000, now: c.now });
    assert.equal(h.snapshot().healthy, true);
    h.queued();
    c.advance(59_999);
    assert.equal(h.snapshot().healthy, true);
    c.advance(1);
    assert.equal(h.snapshot().healthy, false, "a change waited the whole timeout");
    h.updated();
    assert.equal(h.snapshot().healthy, true);
  });

  test("the oldest waiting change counts, not the latest", () => {
    const c = clock();
    const h = new ProxyHealth({ families: ["IPv4", "IPv6"], timeoutMs: 1000, now: c.now });
    h.queued();
    c.advance(600);
    h.queued();
    c.advance(600);
    const s = h.snapshot();
    assert.equal(s.healthy, false);
    assert.deepEqual(
      [...s.families.values()].map((f) => f.healthy),
      [false, false],
    );
  });
});

describe("healthAnswer (kube-proxy bodies)", () => {
  const c = clock();
  const h = new ProxyHealth({ families: ["IPv4"], timeoutMs: 1000, now: c.now });

  test("/healthz is 503 until the node is known eligible; /livez ignores eligibility", () => {
    const s = h.snapshot();
    const healthz = healthAnswer(s, true);
    assert.equal(healthz.status, 503);
    assert.deepEqual(JSON.parse(healthz.body), {
      lastUpdated: "0001-01-01T00:00:00Z",
      currentTime: "2026-01-01T00:00:00.000Z",
      nodeEligible: false,
      healthy: true,
      status: { IPv4: { lastUpdated: "0001-01-01T00:00:00Z", healthy: true } },
    });
    const livez = healthAnswer(s, false);
    assert.equal(livez.status, 200);
    assert.equal("nodeEligible" in JSON.parse(livez.body), false);
  });

  test("200 with lastUpdated = now when healthy and eligible; 503 when a change is stuck", () => {
    h.setNodeEligible(true);
    h.updated();
    c.advance(5000);
    const ok = healthAnswer(h.snapshot(), true);
    assert.equal(ok.status, 200);
    assert.equal(JSON.parse(ok.body).lastUpdated, "2026-01-01T00:00:05.000Z");
    h.queued();
    c.advance(1000);
    const stuck = healthAnswer(h.snapshot(), true);
    assert.equal(stuck.status, 503);
    assert.equal(JSON.parse(stuck.body).lastUpdated, "2026-01-01T00:00:00.000Z");
    assert.equal(healthAnswer(h.snapshot(), false).status, 503, "/livez too: the proxy is stuck");
  });
});

describe("health server", () => {
  test("serves /healthz and /livez with JSON and nosniff; other paths are 404", async () => {
    const h = new ProxyHealth({ families: ["IPv4"], timeoutMs: 1000 });
    h.setNodeEligible(true);
    const server = await startHealthServer("127.0.0.1", 0, h);
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const r = await fetch(`${base}/healthz`);
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("content-type"), "application/json");
      assert.equal(r.headers.get("x-content-type-options"), "nosniff");
      assert.equal(((await r.json()) as { nodeEligible: boolean }).nodeEligible, true);
      h.setNodeEligible(false);
      assert.equal((await fetch(`${base}/healthz`)).status, 503);
      assert.equal((await fetch(`${base}/livez`)).status, 200);
      assert.equal((await fetch(`${base}/other`)).status, 404);
    } finally {
      await close(server);
    }
  });
});
