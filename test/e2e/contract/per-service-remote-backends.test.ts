// Per-Service backends over the API: one brain (`kpng file … to-api --every-service-proxy-name`)
// and, on node-1, two remote backends in their own processes: `kpng local --api … to-nft` for
// the unlabelled Services and `kpng local --api … --service-proxy-name legacy to-iptables` (or
// to-ebpf).
// Relabelling a Service moves it between them while clients keep connecting; each client
// reports its syncs back, so the handover is confirmed as in one process: never held by
// neither backend, by both only for one sync of the loser, and no fallback.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { eventually } from "../../support/eventually.ts";
import { waitForSocket } from "../../support/kpng-cli.ts";
import { type Spawned, suiteTopology, type Topology } from "../../support/netns.ts";
import { writeCluster } from "./cluster.ts";
import { checkRelabelMoves, holders, OLD, PODS, probe, services, WEB } from "./relabel-moves.ts";
import { LABELLED, SINK_FLAGS } from "./two-backends.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const BRAIN_METRICS = "127.0.0.1:10261";

for (const pair of LABELLED)
  describe(`per-Service backends over the API: remote nft and ${pair.name} backends of one brain`, {
    skip: pair.skip,
  }, () => {
    const env = suiteTopology({ pods: PODS });
    const labelled = pair.make();
    const dir = mkdtempSync(join(tmpdir(), "kpng-per-service-remote-e2e-"));
    const file = join(dir, "cluster.yaml");
    const socket = join(dir, "api.sock");
    const api = `unix://${socket}`;
    const processes: Spawned[] = [];
    let brain: Spawned;
    let topo: Topology;

    /** `kpng local --api … [--service-proxy-name X] <sink> …` on node-1, with its own servers' ports. */
    const remoteBackend = (name: string, proxyName: string[], sink: string[], ports: [number, number]) =>
      topo.node.spawn(
        [
          process.execPath,
          MAIN,
          "local",
          "--api",
          api,
          ...proxyName,
          ...sink,
          ...SINK_FLAGS,
          "--healthz-bind-address",
          `127.0.0.1:${ports[0]}`,
          "--metrics-bind-address",
          `127.0.0.1:${ports[1]}`,
        ],
        { name, env: { KPNG_LOG_LEVEL: "debug" } },
      );

    before(async () => {
      topo = env.topology;
      writeCluster(file, services(topo, undefined));
      brain = topo.node.spawn(
        [
          process.execPath,
          MAIN,
          "file",
          "--input",
          file,
          "to-api",
          "--listen",
          api,
          "--every-service-proxy-name",
          "--metrics-address",
          BRAIN_METRICS,
        ],
        { name: "brain", env: { KPNG_LOG_LEVEL: "debug" } },
      );
      processes.push(brain);
      await waitForSocket(socket);
      processes.push(remoteBackend("nft backend", [], ["to-nft"], [10256, 10249]));
      processes.push(
        remoteBackend(
          `${labelled.name} backend`,
          ["--service-proxy-name", "legacy"],
          [...labelled.sink()],
          [10257, 10250],
        ),
      );
      await eventually(
        async () => (await probe(topo, labelled, WEB, 80)).ok && (await probe(topo, labelled, OLD, 80)).ok,
        "both remote backends to program their Services",
        // A cold start loads programs (to-ebpf): generous on a loaded machine.
        60_000,
      );
    });

    after(async () => {
      for (const p of processes.reverse()) {
        await p.stop();
        if (process.env.KPNG_E2E_LOGS) console.log(p.stderr());
      }
      await topo.node.exec(["nft", "delete", "table", "ip", "kpng"]).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    });

    test("each remote backend serves only the Services of its proxy name", async () => {
      assert.deepEqual(await holders(topo, labelled, WEB), { nft: true, labelled: false });
      assert.deepEqual(await holders(topo, labelled, OLD), { nft: false, labelled: true });
    });

    test("relabelling moves a Service between remote backends while clients keep connecting", async (t) => {
      await checkRelabelMoves(t, topo, labelled, file);
      // Confirmed by the gaining backend's sync reports: the brain never fell back.
      const log = brain.stderr();
      assert.doesNotMatch(log, /did not confirm a sync holding it|reports no syncs/);
      const metrics = (await topo.node.exec(["curl", "-s", `http://${BRAIN_METRICS}/metrics`])).stdout;
      assert.match(metrics, /# HELP kpng_handover_fallbacks_total /);
      assert.doesNotMatch(metrics, /^kpng_handover_fallbacks_total\{[^}]*\} [1-9]/m);
    });
  });
