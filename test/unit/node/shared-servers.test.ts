// Several backends in one process: one /healthz per address, healthy only when every backend is,
// closed when the last backend leaves.

import assert from "node:assert/strict";
import { test } from "node:test";
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
  // Port 0: the first backend picks a free port; the second joins the same server.
  const sa = await shareHealthServer("127.0.0.1", 0, a);
  const sb = await shareHealthServer("127.0.0.1", 0, b);
  assert.equal(sb.address.port, sa.address.port);
  const get = () => fetch(`http://127.0.0.1:${sa.address.port}/healthz`).then((r) => r.status);
  assert.equal(await get(), 503);
  bHealthy = true;
  assert.equal(await get(), 200);
  await sb.leave();
  assert.equal(await get(), 200);
  await sa.leave();
  await assert.rejects(get());
});
