// NodePort addresses given as CIDRs follow the node's interfaces without a resync: the rules
// match "a local address in these CIDRs" (nft `fib daddr type local`, iptables `addrtype
// LOCAL`), so an address added after kpng started takes NodePort traffic at once, and one
// removed stops taking it. Real TCP from the external client, nft and iptables.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { outcome, probeOneFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import { netnsSkipReason, suiteTopology } from "../../support/netns.ts";
import { type TestService, writeCluster } from "./cluster.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();
const NODE_PORT = 30931;
/** An address of the node's link that the node does not hold at start. */
const ADDED = "192.0.2.7";

const BACKENDS = [
  { name: "nft", sink: ["to-nft"] },
  { name: "iptables", sink: ["to-iptables", "--iptables-mode", "nft"] },
];

describe("NodePort CIDRs follow the node's addresses", { skip }, () => {
  const env = suiteTopology({ pods: [{ name: "web", echo: { tcpPorts: [8080] } }] });
  const dir = mkdtempSync(join(tmpdir(), "kpng-nodeport-address-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const backend of BACKENDS)
    test(`${backend.name}: an address added after start takes NodePort traffic; removed, it stops`, async (t) => {
      const topo = env.topology;
      const file = join(dir, `${backend.name}.yaml`);
      const svc: TestService = {
        name: "web",
        type: "NodePort",
        clusterIP: "203.0.113.31",
        ports: [{ name: "http", port: 80, targetPort: 8080, nodePort: NODE_PORT }],
        endpoints: [{ ip: topo.pod("web").ipv4!, node: "node-1" }],
      };
      writeCluster(file, [svc]);
      const argv = [process.execPath, MAIN, "file", "--input", file, "to-local", ...backend.sink];
      const kpng = topo.node.spawn(
        [
          ...argv,
          "--node-name",
          "node-1",
          "--nodeport-addresses",
          "192.0.2.0/24",
          "--min-sync-period",
          "100ms",
        ],
        { name: "kpng" },
      );
      t.after(async () => {
        await kpng.stop();
        await topo.node.exec(["ip", "address", "del", `${ADDED}/24`, "dev", "ext0"]).catch(() => {});
        await topo.node.exec([process.execPath, MAIN, "cleanup", backend.sink[0]!.replace("to-", "")]);
      });
      const viaNodePort = async (ip: string) =>
        outcome(await probeOneFrom(topo.external, tcp(ip, NODE_PORT, 500)));
      await eventually(
        async () => (await viaNodePort(topo.nodeIPv4)) === "web",
        "kpng to program the first state",
        60_000,
      );
      assert.notEqual(await viaNodePort(ADDED), "web", "not an address of the node yet");

      await topo.node.exec(["ip", "address", "add", `${ADDED}/24`, "dev", "ext0"]);
      await eventually(async () => (await viaNodePort(ADDED)) === "web", `the NodePort on ${ADDED}`, 5_000);

      await topo.node.exec(["ip", "address", "del", `${ADDED}/24`, "dev", "ext0"]);
      // The external client may still hold the node's MAC for it: the node no longer takes it.
      await eventually(
        async () => (await viaNodePort(ADDED)) !== "web",
        `the NodePort gone from ${ADDED}`,
        5_000,
      );
    });
});
