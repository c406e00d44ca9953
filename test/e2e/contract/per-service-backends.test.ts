// Per-Service backends from one brain: one kpng process runs the nft backend for the unlabelled
// Services and the iptables backend for those labelled service-proxy-name=legacy, on one node.
// Real traffic reaches both; relabelling a Service moves it from one backend to the other while
// clients keep connecting, and afterwards exactly one backend holds it. One /healthz and
// /metrics serve the process, with a backend label on the sync metrics.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { outcome, type ProbeResult, probeFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import { netnsSkipReason, type Spawned, suiteTopology, type Topology } from "../../support/netns.ts";
import { type TestService, writeCluster } from "./cluster.ts";
import { spawnTwoBackends } from "./two-backends.ts";

const skip = await netnsSkipReason();
const echo = { tcpPorts: [8080] };
const http = [{ name: "http", port: 80, targetPort: 8080 }];
const WEB = "203.0.113.10";
const OLD = "203.0.113.11";
/** One sync of the losing backend: its --min-sync-period (100 ms) and a few Services' sync under load (a fixed 2×100 ms + 2 s hold, as before, exceeds it). */
const ONE_SYNC_MS = 100 + 1900;

describe("per-Service backends: nft and iptables in one process", { skip }, () => {
  const env = suiteTopology({
    pods: [
      { name: "web-1", echo },
      { name: "web-2", echo },
    ],
  });
  const dir = mkdtempSync(join(tmpdir(), "kpng-per-service-e2e-"));
  const file = join(dir, "cluster.yaml");
  let kpng: Spawned | undefined;
  let topo: Topology;

  function services(webProxyName: string | undefined): TestService[] {
    const ip = (pod: string) => topo.pod(pod).ipv4 ?? "";
    return [
      {
        name: "web",
        clusterIP: WEB,
        ports: http,
        endpoints: [
          { ip: ip("web-1"), node: "node-1" },
          { ip: ip("web-2"), node: "node-2" },
        ],
        ...(webProxyName === undefined ? {} : { proxyName: webProxyName }),
      },
      {
        name: "old",
        type: "NodePort",
        clusterIP: OLD,
        ports: [{ ...http[0]!, nodePort: 30080 }],
        endpoints: [{ ip: ip("web-2"), node: "node-2" }],
        proxyName: "legacy",
      },
    ];
  }

  const probe = async (host: string, port: number, timeoutMs = 1000): Promise<ProbeResult> => {
    const [r] = await probeFrom(topo.client.ns, [tcp(host, port, timeoutMs)]);
    return r!;
  };

  /** Whether each backend holds the address: nft in its service map, iptables in its nat rules. */
  async function holders(ip: string): Promise<{ nft: boolean; iptables: boolean }> {
    const nft = (await topo.node.exec(["nft", "list", "table", "ip", "kpng"])).stdout;
    const ipt = (await topo.node.exec(["iptables-nft-save", "-t", "nat"])).stdout;
    return {
      nft: nft.includes(ip),
      iptables: ipt.split("\n").some((l) => l.startsWith("-A KPNG") && l.includes(ip)),
    };
  }

  before(async () => {
    topo = env.topology;
    writeCluster(file, services(undefined));
    kpng = spawnTwoBackends(topo.node, file, [
      "--healthz-bind-address",
      "127.0.0.1:10256",
      "--metrics-bind-address",
      "127.0.0.1:10249",
    ]);
    await eventually(
      async () => (await probe(WEB, 80)).ok && (await probe(OLD, 80)).ok,
      "both backends to program their Services",
      30_000,
    );
  });

  after(async () => {
    const out = await kpng?.stop();
    if (out && process.env.KPNG_E2E_LOGS) console.log(kpng?.stderr());
    await topo.node.exec(["nft", "delete", "table", "ip", "kpng"]).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  test("each backend serves only the Services of its proxy name", async () => {
    assert.deepEqual(await holders(WEB), { nft: true, iptables: false });
    assert.deepEqual(await holders(OLD), { nft: false, iptables: true });
    assert.equal(outcome(await probe(OLD, 80)), "web-2");
    // The node port of the iptables backend's Service, past the nft backend's node-port chain.
    const [np] = await probeFrom(topo.external, [tcp("192.0.2.1", 30080)]);
    assert.equal(np && outcome(np), "web-2");
  });

  test("one /healthz and /metrics for the process; sync metrics per backend", async () => {
    const health = await topo.node.exec([
      "curl",
      "-s",
      "-o",
      "/dev/null",
      "-w",
      "%{http_code}",
      "http://127.0.0.1:10256/healthz",
    ]);
    assert.equal(health.stdout, "200");
    const metrics = (await topo.node.exec(["curl", "-s", "http://127.0.0.1:10249/metrics"])).stdout;
    assert.match(
      metrics,
      /kubeproxy_sync_proxy_rules_last_timestamp_seconds\{backend="nftables",ip_family="IPv4"\}/,
    );
    assert.match(
      metrics,
      /kubeproxy_sync_proxy_rules_last_timestamp_seconds\{backend="iptables",ip_family="IPv4"\}/,
    );
  });

  test("relabelling moves a Service between backends while clients keep connecting", async (t) => {
    // Connections keep being opened during the moves. The losing backend keeps the Service until
    // the gaining one has programmed it (the handover), so none may fail.
    const results: { at: number; r: ProbeResult }[] = [];
    let moving = true;
    const traffic = (async () => {
      while (moving) {
        const batch = await probeFrom(
          topo.client.ns,
          Array.from({ length: 10 }, () => tcp(WEB, 80, 1000)),
          { concurrency: 2 },
        );
        const at = Date.now();
        for (const r of batch) results.push({ at, r });
      }
    })();
    const moves: number[] = [];
    /** Per move: how long both backends held the Service, and how often neither did. */
    const windows: { to: string; bothMs: number; neither: number; samples: number }[] = [];
    const move = async (proxyName: string | undefined, to: "nft" | "iptables") => {
      await new Promise((r) => setTimeout(r, 1000));
      moves.push(Date.now());
      writeCluster(file, services(proxyName));
      // Sample who holds it until only the gaining backend does.
      let bothSince: number | undefined;
      let bothMs = 0;
      let neither = 0;
      let samples = 0;
      const deadline = Date.now() + 30_000;
      for (;;) {
        const h = await holders(WEB);
        const at = Date.now();
        samples++;
        if (h.nft && h.iptables) bothSince ??= at;
        if (!h.nft && !h.iptables) neither++;
        const moved = to === "iptables" ? h.iptables && !h.nft : h.nft && !h.iptables;
        if (moved) {
          if (bothSince !== undefined) bothMs = at - bothSince;
          break;
        }
        assert.ok(at < deadline, `web to move to ${to}`);
      }
      windows.push({ to, bothMs, neither, samples });
    };
    await move("legacy", "iptables");
    await move(undefined, "nft");
    await new Promise((r) => setTimeout(r, 1000));
    moving = false;
    await traffic;
    assert.ok(results.length >= 20, `only ${results.length} connections during the moves`);
    const failed = results
      .filter(({ r }) => !r.ok)
      .map(({ at, r }) => `${outcome(r)} at +${at - (moves[0] ?? 0)} ms`);
    assert.deepEqual(
      failed,
      [],
      `connections failed during the moves (moves at +0 and +${(moves[1] ?? 0) - (moves[0] ?? 0)} ms)`,
    );
    assert.ok((await probe(WEB, 80)).ok);
    // The handover: the loser drops the Service once the gainer's sync holds it, so neither is
    // never seen, and both only until the loser's next sync: one --min-sync-period (100 ms) and
    // the sync itself, allowed ONE_SYNC_MS on this loaded machine.
    t.diagnostic(`handover windows: ${JSON.stringify(windows)}`);
    for (const w of windows) {
      assert.equal(
        w.neither,
        0,
        `moving to ${w.to}: held by neither backend in ${w.neither}/${w.samples} samples`,
      );
      assert.ok(
        w.bothMs <= ONE_SYNC_MS,
        `moving to ${w.to}: held by both for ${w.bothMs} ms (> ${ONE_SYNC_MS} ms)`,
      );
    }
  });
});
