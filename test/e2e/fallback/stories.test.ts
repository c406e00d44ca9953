// The KEP's stories with real traffic: `kpng kube … to-local to-nft` in a node namespace reads
// the test API server, the fallback controller writes the fallback slices, and a client pod
// sends TCP requests to the Service's cluster IP and sees which pod answers.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { node } from "../../apiserver/fixtures.ts";
import { TestApiServer } from "../../apiserver/server.ts";
import type { RawObject } from "../../apiserver/store.ts";
import { outcome, probeFrom } from "../../support/client.ts";
import { netnsSkipReason, type Spawned, suiteTopology, type Topology } from "../../support/netns.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const RELAY = fileURLToPath(new URL("./tcp-to-unix.ts", import.meta.url));
const skip = await netnsSkipReason();
const echo = { tcpPorts: [8080] };
const RELAY_PORT = 18_443;

type Kinded = RawObject & { kind: string };

function report(line: string): void {
  process.stdout.write(`# ${line}\n`);
}

async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 45_000): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("fallback stories with real traffic (kube source, nft backend)", { skip }, () => {
  const env = suiteTopology({
    pods: [
      { name: "shop-1", echo },
      { name: "sorry-1", echo },
      { name: "cache-1", echo },
      { name: "canary-1", echo },
      { name: "waker-1", echo },
    ],
  });
  const dir = mkdtempSync(join(tmpdir(), "kpng-fallback-e2e-"));
  const socket = join(dir, "api.sock");
  let topo: Topology;
  let api: TestApiServer;
  let bridge: Server;
  let relay: Spawned;
  let kpng: Spawned;
  let controller: ChildProcess;
  let controllerLog = "";
  let nextIP = 20;

  function pod(name: string, labels: Record<string, string>, ready = true): Kinded {
    return {
      kind: "Pod",
      metadata: { name, namespace: "default", labels },
      spec: {
        nodeName: "node-1",
        containers: [{ name: "c", ports: [{ name: "http", containerPort: 8080 }] }],
      },
      status: {
        phase: "Running",
        podIPs: [{ ip: topo.pod(name).ipv4! }],
        conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
      },
    };
  }

  /**
   * A Service on its own cluster IP with a fallback selector, and no selector of its own: its
   * primary EndpointSlice is hand-made, as for a Service whose endpoints someone else manages.
   */
  function story(name: string, primaries: readonly string[], selector: string, returnDelay = "1s"): string {
    const clusterIP = `203.0.113.${nextIP++}`;
    api.create({
      kind: "Service",
      metadata: {
        name,
        namespace: "default",
        annotations: { "fallback.kpng.io/selector": selector, "fallback.kpng.io/return-delay": returnDelay },
      },
      spec: {
        type: "ClusterIP",
        clusterIP,
        clusterIPs: [clusterIP],
        ipFamilies: ["IPv4"],
        ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: "http" }],
      },
    });
    api.create({
      kind: "EndpointSlice",
      metadata: { name: `${name}-abc`, namespace: "default", labels: { "kubernetes.io/service-name": name } },
      addressType: "IPv4",
      ports: [{ name: "http", protocol: "TCP", port: 8080 }],
      endpoints: primaries.map((p) => ({
        addresses: [topo.pod(p).ipv4!],
        conditions: { ready: true, serving: true, terminating: false },
        nodeName: "node-1",
        targetRef: { kind: "Pod", namespace: "default", name: p },
      })),
    });
    return clusterIP;
  }

  function setPrimaryReady(name: string, ready: boolean): void {
    const slice = api.get("EndpointSlice", `default/${name}-abc`) as Kinded & {
      endpoints: { conditions: unknown }[];
    };
    for (const e of slice.endpoints) e.conditions = { ready, serving: ready, terminating: false };
    api.update(slice);
  }

  async function answers(clusterIP: string, n = 8): Promise<string[]> {
    const results = await probeFrom(
      topo.client.ns,
      Array.from({ length: n }, () => ({
        proto: "tcp" as const,
        host: clusterIP,
        port: 80,
        timeoutMs: 1000,
      })),
      { concurrency: 4 },
    );
    return [...new Set(results.map(outcome))].sort();
  }

  async function answeredBy(clusterIP: string, pods: string[], what: string): Promise<number> {
    return await eventually(what, async () => (await answers(clusterIP)).join() === pods.join());
  }

  before(async () => {
    topo = env.topology;
    api = await TestApiServer.start({ bookmarkIntervalMs: 500 });
    api.create(node("node-1"));
    // kpng runs in the node namespace; it reaches the API server through a unix socket.
    bridge = createServer((c) => {
      const upstream = createConnection(api.port, "127.0.0.1");
      c.pipe(upstream).pipe(c);
      c.on("error", () => upstream.destroy());
      upstream.on("error", () => c.destroy());
    });
    await new Promise<void>((resolve) => bridge.listen(socket, resolve));
    relay = topo.node.spawn([process.execPath, RELAY, String(RELAY_PORT), socket], { name: "relay" });
    await relay.waitForLine(/^listening /);
    controller = spawn(
      process.execPath,
      [
        MAIN,
        "fallback-controller",
        "--master",
        api.url,
        "--no-leader-elect",
        "--metrics-address",
        "127.0.0.1:0",
      ],
      {
        stdio: ["ignore", "ignore", "pipe"],
        env: { ...process.env, KUBECONFIG: "", HOME: "/nonexistent" },
      },
    );
    controller.stderr!.setEncoding("utf8").on("data", (t: string) => {
      controllerLog += t;
    });
    kpng = topo.node.spawn(
      [
        process.execPath,
        MAIN,
        "kube",
        "--master",
        `http://127.0.0.1:${RELAY_PORT}`,
        "to-local",
        "to-nft",
        "--node-name",
        "node-1",
        "--cluster-cidr",
        "198.51.100.0/24",
        "--min-sync-period",
        "100ms",
      ],
      { name: "kpng", env: { KUBECONFIG: "", HOME: "/nonexistent" } },
    );
  });

  after(async () => {
    const out = await kpng?.stop();
    if (out && process.env.KPNG_E2E_LOGS) console.log(kpng.stderr(), controllerLog);
    controller?.kill("SIGTERM");
    await relay?.stop();
    await new Promise<void>((resolve) => (bridge ? bridge.close(() => resolve()) : resolve()));
    await api?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('story 1: a branded "service unavailable" page while the shop has no ready pod, then back', async () => {
    const ip = story("shop", ["shop-1"], "app=sorry-page");
    api.create(pod("sorry-1", { app: "sorry-page" }));
    await answeredBy(ip, ["shop-1"], "the shop answering");
    setPrimaryReady("shop", false);
    const toFallback = await answeredBy(ip, ["sorry-1"], "the sorry page answering");
    report(`story 1: sorry page answering ${toFallback} ms after the shop's last ready pod went`);
    setPrimaryReady("shop", true);
    const back = await answeredBy(ip, ["shop-1"], "the shop answering again");
    report(`story 1: shop answering again ${back} ms after it became ready (return delay 1s)`);
    assert.ok(back >= 900, `returned after ${back} ms, before the return delay`);
  });

  test("story 2: a wake-up page for an environment scaled to zero", async () => {
    const ip = story("env", [], "app=waker");
    api.create(pod("waker-1", { app: "waker" }));
    await answeredBy(ip, ["waker-1"], "the wake-up page answering");
  });

  test("story 3: a cache that falls back to the app while no cache pod is ready", async () => {
    const ip = story("cache", ["cache-1"], "app=shop");
    api.create(pod("shop-1", { app: "shop" }));
    await answeredBy(ip, ["cache-1"], "the cache answering");
    setPrimaryReady("cache", false);
    await answeredBy(ip, ["shop-1"], "the app answering for the cache");
    setPrimaryReady("cache", true);
    await answeredBy(ip, ["cache-1"], "the cache answering again");
  });

  test("story 4: a canary Service falls back to the primary pods, never mixed", async () => {
    const ip = story("canary", ["canary-1"], "app in (web),track!=canary", "3s");
    api.create(pod("canary-1", { app: "web", track: "canary" }));
    await answeredBy(ip, ["canary-1"], "the canary answering");
    // The stable pod of app "web" (the cache-1 namespace serves as it here).
    api.create(pod("cache-1", { app: "web", track: "stable" }));
    setPrimaryReady("canary", false);
    await answeredBy(ip, ["cache-1"], "the primary answering for the canary");
    // While the fallback is active and the canary is ready again, only the fallback answers.
    setPrimaryReady("canary", true);
    assert.deepEqual(await answers(ip), ["cache-1"]);
    await answeredBy(ip, ["canary-1"], "the canary answering again");
  });
  test("flapping: a primary ready and not ready every 200 ms for 6 s: never mixed, at most 2 switches per return delay", async () => {
    const name = "flappy";
    const ip = story(name, ["shop-1"], "app=sorry-page", "1s");
    await answeredBy(ip, ["shop-1"], "the primary answering");
    const writes = () =>
      api.requests.filter((r) => r.resource === "endpointslices" && r.method !== "GET").length;
    const switches = () =>
      api.store
        .snapshot("events", api.store.currentRv)
        .filter((e) => e.reason === "FallbackActivated" || e.reason === "FallbackDeactivated")
        .filter((e) => (e as { involvedObject?: { name?: string } }).involvedObject?.name === name).length;
    const [switchesBefore, writesBefore] = [switches(), writes()];
    const started = Date.now();
    const seen: string[][] = [];
    for (let i = 0; Date.now() - started < 6000; i++) {
      setPrimaryReady(name, i % 2 === 1);
      seen.push(await answers(ip, 4));
      await new Promise((r) => setTimeout(r, 200));
    }
    setPrimaryReady(name, true);
    await answeredBy(ip, ["shop-1"], "the primary answering after the flapping");
    const seconds = (Date.now() - started) / 1000;
    const [switched, written] = [switches() - switchesBefore, writes() - writesBefore];
    report(
      `flapping for ${seconds.toFixed(1)} s (return delay 1 s): ${switched} switches, ${written} slice writes`,
    );
    for (const answer of seen) {
      assert.ok(!(answer.includes("shop-1") && answer.includes("sorry-1")), `mixed: ${answer.join()}`);
    }
    assert.ok(switched <= 2 * Math.ceil(seconds / 1), `${switched} switches in ${seconds} s`);
    assert.ok(written <= switched + 2, `${written} writes for ${switched} switches`);
  });

  test("bad input: an invalid selector, return delay banana, a selector matching nothing: no fallback", async () => {
    // sorry-1 (app=sorry-page) exists since story 1; none of these may send traffic to it.
    const cases = [
      story("bad-selector", ["shop-1"], "app in (sorry-page"),
      story("banana", ["shop-1"], "app=sorry-page", "banana"),
      story("nobody", ["shop-1"], "app=nobody"),
    ];
    for (const ip of cases) await answeredBy(ip, ["shop-1"], `the primary answering on ${ip}`);
    for (const name of ["bad-selector", "banana", "nobody"]) setPrimaryReady(name, false);
    for (const ip of cases) {
      await eventually(`no pod answering on ${ip}`, async () => !(await answers(ip)).includes("shop-1"));
    }
    await new Promise((r) => setTimeout(r, 1500));
    for (const ip of cases) {
      const seen = await answers(ip);
      assert.ok(!seen.includes("sorry-1") && !seen.includes("shop-1"), `${ip} answered by ${seen.join()}`);
    }
    const warnings = api.store
      .snapshot("events", api.store.currentRv)
      .filter((e) => e.reason === "InvalidFallback")
      .map((e) => (e as { involvedObject?: { name?: string } }).involvedObject?.name)
      .sort();
    assert.deepEqual(warnings, ["bad-selector", "banana"]);
  });
});
