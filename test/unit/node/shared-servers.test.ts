// Several backends in one process: one /healthz per address, healthy only when every backend is,
// closed when the last backend leaves.

import assert from "node:assert/strict";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { startHealthServer } from "../../../src/node/health-server.ts";
import type { HealthSnapshot } from "../../../src/node/proxy-health.ts";
import { combinedSnapshot, shareHealthServer } from "../../../src/node/shared-servers.ts";

function snapshot(healthy: boolean, lastUpdated: number | undefined): HealthSnapshot {
  return {
    healthy,
    nodeEligible: true,
    lastUpdated,
    now: 1000,
    families: new Map([["IPv4", { lastUpdated, healthy }]]),
  };
}

test("the combined health is healthy only when every backend is, and reports the oldest sync", () => {
  const both = combinedSnapshot([snapshot(true, 900), snapshot(true, 500)]);
  assert.equal(both.healthy, true);
  assert.equal(both.lastUpdated, 500);
  assert.equal(both.families.get("IPv4")?.lastUpdated, 500);
  const oneLags = combinedSnapshot([snapshot(true, 900), snapshot(false, undefined)]);
  assert.equal(oneLags.healthy, false);
  assert.equal(oneLags.families.get("IPv4")?.healthy, false);
  assert.equal(oneLags.lastUpdated, undefined);
});

test("two backends share one /healthz; it closes when the last one leaves", async () => {
  let bHealthy = false;
  const a = { snapshot: () => snapshot(true, 900) };
  const b = { snapshot: () => snapshot(bHealthy, 900) };
  let opened = 0;
  let server: Server | undefined;
  const open = async (combined: { snapshot(): HealthSnapshot }) => {
    opened++;
    server = await startHealthServer("127.0.0.1", 0, combined);
    const s = server;
    return { close: () => new Promise<void>((resolve) => s.close(() => resolve())) };
  };
  const sa = await shareHealthServer("test:1", a, open);
  const sb = await shareHealthServer("test:1", b, open);
  assert.equal(opened, 1);
  assert.equal(sa.server, sb.server);
  assert.ok(server);
  const port = (server.address() as AddressInfo).port;
  const get = () =>
    fetch(`http://127.0.0.1:${port}/healthz`, { headers: { connection: "close" } }).then((r) => r.status);
  assert.equal(await get(), 503);
  bHealthy = true;
  assert.equal(await get(), 200);
  await sb.leave();
  assert.equal(await get(), 200);
  await sa.leave();
  await assert.rejects(get());
});
