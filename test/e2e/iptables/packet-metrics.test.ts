// kube-proxy's iptables metrics read from a real kernel after syncs with real traffic: rules per
// table, packets dropped as conntrack-INVALID in forwarding, connections accepted on localhost
// NodePorts. kpng runs `to-iptables --localhost-nodeports` in the node namespace.

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { outcome, probeFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import { netnsSkipReason, type Spawned, suiteTopology, type Topology } from "../../support/netns.ts";
import { writeCluster } from "../contract/cluster.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();

/** One metric's sample value, labels as written by prom-client ("" for none). */
function sample(scrape: string, name: string, labels = ""): number | undefined {
  const line = scrape.split("\n").find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

describe("iptables packet and rule metrics", { skip }, () => {
  const env = suiteTopology({ pods: [{ name: "web-1", echo: { tcpPorts: [8080] } }] });
  const dir = mkdtempSync(join(tmpdir(), "kpng-iptables-metrics-e2e-"));
  const file = join(dir, "cluster.yaml");
  let kpng: Spawned | undefined;
  let topo: Topology;
  const scrape = async () =>
    (await topo.node.exec(["curl", "-sf", "http://127.0.0.1:10249/metrics"]).catch(() => undefined))
      ?.stdout ?? "";

  before(async () => {
    topo = env.topology;
    const ip = topo.pod("web-1").ipv4 ?? "";
    writeCluster(file, [
      {
        name: "web",
        type: "NodePort",
        clusterIP: "203.0.113.10",
        ports: [{ name: "http", port: 80, targetPort: 8080, nodePort: 30080 }],
        endpoints: [{ ip, node: "node-1" }],
      },
    ]);
    kpng = topo.node.spawn(
      [
        process.execPath,
        MAIN,
        "file",
        "--input",
        file,
        "to-local",
        "to-iptables",
        "--iptables-mode",
        "nft",
        "--node-name",
        "node-1",
        "--nodeport-addresses",
        "192.0.2.1/32,127.0.0.0/8",
        "--localhost-nodeports",
        "--cluster-cidr",
        "198.51.100.0/24",
        "--metrics-bind-address",
        "127.0.0.1:10249",
        "--healthz-bind-address",
        "127.0.0.1:10256",
      ],
      { name: "kpng" },
    );
    await eventually(
      async () => (await probeFrom(topo.client.ns, [tcp("203.0.113.10", 80)]))[0]?.ok === true,
      "the Service to be programmed",
      30_000,
    );
  });

  after(async () => {
    await kpng?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("rules kpng owns and last wrote, per table and family", async () => {
    const text = await scrape();
    const nat = sample(text, "kubeproxy_sync_proxy_rules_iptables_total", '{table="nat",ip_family="IPv4"}');
    const saved = (await topo.node.exec(["iptables-nft-save", "-t", "nat"])).stdout;
    const owned = saved.split("\n").filter((l) => l.startsWith("-A KPNG-")).length;
    assert.equal(nat, owned, "every -A line of kpng's nat chains");
    assert.ok(
      (sample(text, "kubeproxy_sync_proxy_rules_iptables_total", '{table="filter",ip_family="IPv4"}') ?? 0) >
        0,
    );
    assert.ok(
      sample(text, "kubeproxy_sync_proxy_rules_iptables_last", '{table="nat",ip_family="IPv4"}') !==
        undefined,
    );
    assert.equal(
      sample(
        text,
        "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
        '{ip_family="IPv4"}',
      ),
      0,
    );
  });

  test("connections to a NodePort on 127.0.0.1 are counted", async () => {
    const before =
      sample(await scrape(), "kubeproxy_iptables_localhost_nodeports_accepted_packets_total") ?? -1;
    assert.ok(before >= 0, "exported from the start");
    const results = await probeFrom(topo.node, [
      tcp("127.0.0.1", 30080),
      tcp("127.0.0.1", 30080),
      tcp("127.0.0.1", 30080),
    ]);
    assert.deepEqual(results.map(outcome), ["web-1", "web-1", "web-1"]);
    // The NodePort on the node's own address is not a localhost one.
    assert.equal((await probeFrom(topo.external, [tcp("192.0.2.1", 30080)]))[0]?.ok, true);
    const now = sample(await scrape(), "kubeproxy_iptables_localhost_nodeports_accepted_packets_total") ?? 0;
    const rules = (await topo.node.exec(["iptables-nft", "-t", "nat", "-S", "KPNG-NODEPORTS", "-v"])).stdout;
    assert.equal(now - before, 3, `one per connection (nat sees each connection's first packet):\n${rules}`);
  });

  test("forwarded packets conntrack finds INVALID are dropped and counted", async () => {
    const before = sample(await scrape(), "kubeproxy_iptables_ct_state_invalid_dropped_packets_total") ?? -1;
    assert.ok(before >= 0, "exported from the start");
    // A connection from the client pod to web-1, forwarded by the node. Once the node forgets it
    // (conntrack flushed, no pick-up of connections in mid-stream), its next segments are INVALID.
    const go = join(dir, "go");
    const writer = topo.client.ns.spawn(
      [
        process.execPath,
        "-e",
        `const fs = require("node:fs");
         const s = require("node:net").connect(8080, ${JSON.stringify(topo.pod("web-1").ipv4)}, () => {
           console.log("connected");
           const wait = setInterval(() => {
             if (!fs.existsSync(${JSON.stringify(go)})) return;
             clearInterval(wait);
             const t = setInterval(() => s.write("x"), 100);
             setTimeout(() => { clearInterval(t); s.destroy(); process.exit(0); }, 3000);
           }, 50);
         });
         s.on("error", () => {});
         setTimeout(() => process.exit(1), 20000);`,
      ],
      { name: "writer" },
    );
    try {
      await writer.waitForLine(/connected/, 10_000);
      await topo.node.exec(["sysctl", "-w", "net.netfilter.nf_conntrack_tcp_loose=0"]);
      await topo.node.exec(["conntrack", "-F"]);
      writeFileSync(go, "");
      await eventually(
        async () =>
          (sample(await scrape(), "kubeproxy_iptables_ct_state_invalid_dropped_packets_total") ?? 0) > before,
        "INVALID packets to be counted",
        15_000,
      );
    } finally {
      await writer.stop();
      await topo.node.exec(["sysctl", "-w", "net.netfilter.nf_conntrack_tcp_loose=1"]);
      if (existsSync(go)) rmSync(go);
    }
    const rules = (await topo.node.exec(["iptables-nft", "-t", "filter", "-S", "KPNG-FORWARD", "-v"])).stdout;
    assert.match(rules, /--ctstate INVALID -c [1-9]\d* \d+ -j DROP/, rules);
  });
});
