import assert from "node:assert/strict";
import { createServer } from "node:net";
import { describe, test } from "node:test";
import { HealthCheckNodePorts, healthCheckAnswer } from "../../../src/node/health-check-node-ports.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { service, state } from "../backends/nft/fixtures.ts";

/** A port that is free now (the kernel picks it). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

const lb = (name: string, hc: number, local: number) =>
  service({
    name,
    type: "LoadBalancer",
    externalTrafficPolicy: "Local",
    healthCheckNodePort: hc,
    localReadyEndpoints: local,
  });

describe("healthCheckAnswer", () => {
  test("200 only with local endpoints and a healthy proxy; kube-proxy's body", () => {
    const t = { namespace: "ns", name: "svc", localEndpoints: 2 };
    const a = healthCheckAnswer(t, true);
    assert.equal(a.status, 200);
    assert.equal(
      a.body,
      '{\n\t"service": {\n\t\t"namespace": "ns",\n\t\t"name": "svc"\n\t},\n\t"localEndpoints": 2,\n\t"serviceProxyHealthy": true\n}',
    );
    assert.equal(healthCheckAnswer(t, false).status, 503);
    assert.equal(healthCheckAnswer({ ...t, localEndpoints: 0 }, true).status, 503);
  });
});

describe("HealthCheckNodePorts", () => {
  test("servers follow the state: open, answer on any path, update, close", async () => {
    const port = await freePort();
    let healthy = true;
    const hc = new HealthCheckNodePorts({
      addresses: ["127.0.0.1"],
      proxyHealthy: () => healthy,
      log: silentLogger,
    });
    try {
      await hc.update(state([lb("a", port, 2)]));
      assert.deepEqual(hc.ports, [port]);
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("x-load-balancing-endpoint-weight"), "2");
      assert.equal(r.headers.get("x-content-type-options"), "nosniff");
      assert.deepEqual(await r.json(), {
        service: { namespace: "default", name: "a" },
        localEndpoints: 2,
        serviceProxyHealthy: true,
      });
      await hc.update(state([lb("a", port, 0)]));
      assert.equal((await fetch(`http://127.0.0.1:${port}/anything`)).status, 503);
      await hc.update(state([lb("a", port, 1)]));
      healthy = false;
      assert.equal((await fetch(`http://127.0.0.1:${port}/`)).status, 503);
      await hc.update(state([]));
      assert.deepEqual(hc.ports, []);
      await assert.rejects(fetch(`http://127.0.0.1:${port}/`));
    } finally {
      await hc.close();
    }
  });

  test("a taken port is skipped (the others still serve) and retried at the next update", async () => {
    const [taken, free] = [await freePort(), await freePort()];
    const squatter = createServer();
    await new Promise<void>((r) => squatter.listen(taken, "127.0.0.1", r));
    const hc = new HealthCheckNodePorts({
      addresses: ["127.0.0.1"],
      proxyHealthy: () => true,
      log: silentLogger,
    });
    try {
      const s = state([lb("a", taken, 1), lb("b", free, 1)]);
      await hc.update(s);
      assert.deepEqual(hc.ports, [free]);
      assert.equal((await fetch(`http://127.0.0.1:${free}/`)).status, 200);
      await new Promise((r) => squatter.close(r));
      await hc.update(s);
      assert.deepEqual(
        hc.ports,
        [taken, free].sort((x, y) => x - y),
      );
    } finally {
      squatter.close();
      await hc.close();
    }
  });

  test("the node's addresses change: each port opens on the new ones, closes on the gone ones, stays on the rest", async () => {
    const port = await freePort();
    const hc = new HealthCheckNodePorts({
      addresses: ["127.0.0.1"],
      proxyHealthy: () => true,
      log: silentLogger,
    });
    const status = (host: string) =>
      fetch(`http://${host}:${port}/`).then(
        (r) => r.status,
        () => "refused",
      );
    try {
      await hc.update(state([lb("a", port, 1)]));
      assert.equal(await status("127.0.0.2"), "refused");
      await hc.listenOn(["127.0.0.1", "127.0.0.2"]);
      assert.equal(await status("127.0.0.1"), 200);
      assert.equal(await status("127.0.0.2"), 200);
      await hc.listenOn(["127.0.0.2"]);
      assert.equal(await status("127.0.0.1"), "refused");
      assert.equal(await status("127.0.0.2"), 200);
      // Not an address of this host: that one is retried at the next update, the others serve.
      await hc.listenOn(["127.0.0.2", "192.0.2.1"]);
      assert.equal(await status("127.0.0.2"), 200);
      await hc.listenOn(["127.0.0.2"]);
      await hc.update(state([lb("a", port, 1), lb("b", 0, 1)]));
      assert.equal(await status("127.0.0.2"), 200);
      await hc.update(state([]));
      assert.equal(await status("127.0.0.2"), "refused");
    } finally {
      await hc.close();
    }
  });
});
