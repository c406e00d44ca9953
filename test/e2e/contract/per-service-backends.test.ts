// Per-Service backends from one brain: one kpng process runs the nft backend for the unlabelled
// Services and another backend (iptables, or eBPF) for those labelled service-proxy-name=legacy,
// on one node. Real traffic reaches both; relabelling a Service moves it from one backend to the
// other while clients keep connecting, and afterwards exactly one backend holds it. One /healthz
// and /metrics serve the process, with a backend label on the sync metrics.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { outcome, probeFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import { type Spawned, suiteTopology, type Topology } from "../../support/netns.ts";
import { writeCluster } from "./cluster.ts";
import { checkRelabelMoves, holders, OLD, PODS, probe, services, WEB } from "./relabel-moves.ts";
import { LABELLED, spawnTwoBackends } from "./two-backends.ts";

for (const pair of LABELLED)
  describe(`per-Service backends: nft and ${pair.name} in one process`, { skip: pair.skip }, () => {
    const env = suiteTopology({ pods: PODS });
    const labelled = pair.make();
    const dir = mkdtempSync(join(tmpdir(), "kpng-per-service-e2e-"));
    const file = join(dir, "cluster.yaml");
    let kpng: Spawned | undefined;
    let topo: Topology;

    before(async () => {
      topo = env.topology;
      writeCluster(file, services(topo, undefined));
      kpng = spawnTwoBackends(
        topo.node,
        file,
        ["--healthz-bind-address", "127.0.0.1:10256", "--metrics-bind-address", "127.0.0.1:10249"],
        labelled,
      );
      await eventually(
        async () => (await probe(topo, labelled, WEB, 80)).ok && (await probe(topo, labelled, OLD, 80)).ok,
        "both backends to program their Services",
        // A cold start loads programs (to-ebpf): generous on a loaded machine.
        60_000,
      );
    });

    after(async () => {
      const out = await kpng?.stop();
      if (out && process.env.KPNG_E2E_LOGS) console.log(kpng?.stderr());
      await topo.node.exec(["nft", "delete", "table", "ip", "kpng"]).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    });

    test("each backend serves only the Services of its proxy name", async () => {
      assert.deepEqual(await holders(topo, labelled, WEB), { nft: true, labelled: false });
      assert.deepEqual(await holders(topo, labelled, OLD), { nft: false, labelled: true });
      const listed = await labelled.listing(topo.node);
      assert.ok(
        listed.some((l) => l.includes(OLD)) && !listed.some((l) => l.includes(WEB)),
        listed.join("\n"),
      );
      assert.equal(outcome(await probe(topo, labelled, OLD, 80)), "web-2");
      // The node port of the labelled backend's Service, past the nft backend's node-port chain.
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
      for (const backend of ["nftables", labelled.mode, ...labelled.companions])
        assert.match(
          metrics,
          new RegExp(
            `kubeproxy_sync_proxy_rules_last_timestamp_seconds\\{backend="${backend}",ip_family="IPv4"\\}`,
          ),
        );
      // Each loop has its own series: to-nft's table and a companion's are told apart.
      for (const backend of ["nftables", ...labelled.companions])
        assert.match(
          metrics,
          new RegExp(`^kpng_family_programmed\\{backend="${backend}",family="ip"\\} 1$`, "m"),
        );
    });

    test("relabelling moves a Service between backends while clients keep connecting", async (t) => {
      await checkRelabelMoves(t, topo, labelled, file);
    });
  });
