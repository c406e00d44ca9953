// --detect-local-mode end to end: real traffic from pods in network namespaces through the nft
// and iptables backends. Only a pod that the mode detects as local takes the eTP Local
// short-circuit (its connections to a NodePort reach the endpoint on another node too) and keeps
// its address on ClusterIP traffic; any other source is masqueraded to a ClusterIP and reaches
// only this node's endpoint through the NodePort.
//
// Pods: the topology's client (a pod of this node), "local" (the endpoint on node-1), "remote"
// (the endpoint "on node-2") and "outsider" (not detected as a pod of this node).

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { outcome, probeFrom, probeOneFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import { netnsSkipReason, suiteTopology, type Topology } from "../../support/netns.ts";
import { kpngArgv, type TestService, writeCluster } from "./cluster.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();
const echo = { tcpPorts: [8080] };
const CLUSTER_IP = "203.0.113.30";
const NODE_PORT = 30930;
/** Enough tries that a 1-in-2 draw misses the remote endpoint with probability 2^-16. */
const TRIES = 16;

const BACKENDS = [
  { name: "nft", sink: ["to-nft"] },
  { name: "iptables", sink: ["to-iptables", "--iptables-mode", "nft"] },
];

/** Each mode with flags under which the client, and not the outsider, is detected as a pod of this node. */
const MODES = [
  {
    mode: "NodeCIDR",
    flags: () => ["--detect-local-mode", "NodeCIDR"],
    // node-1's spec.podCIDRs hold the client and the local endpoint, not the outsider.
    node1PodCIDRs: (topo: Topology) => [`${topo.client.ipv4}/32`, `${topo.pod("local").ipv4}/32`],
  },
  {
    mode: "InterfaceNamePrefix",
    // The client's node-side interface name (vpN) is a prefix of no other pod's here.
    flags: (topo: Topology) => [
      "--detect-local-mode",
      "InterfaceNamePrefix",
      "--pod-interface-name-prefix",
      topo.client.hostInterface,
    ],
    node1PodCIDRs: () => undefined,
  },
];

describe("--detect-local-mode with real traffic", { skip }, () => {
  const env = suiteTopology({
    pods: [{ name: "local", echo }, { name: "remote", echo }, { name: "outsider" }],
  });
  const dir = mkdtempSync(join(tmpdir(), "kpng-detect-local-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  const service = (): TestService => ({
    name: "web",
    type: "NodePort",
    clusterIP: CLUSTER_IP,
    externalTrafficPolicy: "Local",
    ports: [{ name: "http", port: 80, targetPort: 8080, nodePort: NODE_PORT }],
    endpoints: [
      { ip: env.topology.pod("local").ipv4!, node: "node-1" },
      { ip: env.topology.pod("remote").ipv4!, node: "node-2" },
    ],
  });

  for (const backend of BACKENDS)
    for (const m of MODES)
      test(`${backend.name}, ${m.mode}: pod→eTP Local NodePort and masquerade follow the detector`, async (t) => {
        const topo = env.topology;
        const file = join(dir, `${backend.name}-${m.mode}.yaml`);
        const node1PodCIDRs = m.node1PodCIDRs(topo);
        writeCluster(file, [service()], { ...(node1PodCIDRs && { node1PodCIDRs }) });
        const kpng = topo.node.spawn(kpngArgv(MAIN, file, backend.sink, m.flags(topo)), { name: "kpng" });
        t.after(async () => {
          await kpng.stop();
          await topo.node.exec([process.execPath, MAIN, "cleanup", backend.sink[0]!.replace("to-", "")]);
        });
        const client = topo.client;
        const outsider = topo.pod("outsider");
        await eventually(
          async () => (await probeOneFrom(client.ns, tcp(CLUSTER_IP, 80))).ok,
          "kpng to program the first state",
          60_000,
        );

        // The client is a pod of this node: short-circuited to every endpoint, its address kept.
        const viaNodePort = async (from: typeof client) =>
          new Set(
            (
              await probeFrom(
                from.ns,
                Array.from({ length: TRIES }, () => tcp(topo.nodeIPv4, NODE_PORT)),
                { concurrency: 4 },
              )
            ).map(outcome),
          );
        assert.deepEqual([...(await viaNodePort(client))].sort(), ["local", "remote"]);
        const fromClient = await probeOneFrom(client.ns, tcp(CLUSTER_IP, 80));
        assert.ok(fromClient.ok);
        assert.equal(
          fromClient.reply?.client.address,
          client.ipv4,
          "pod traffic to a ClusterIP is not masqueraded",
        );

        // The outsider is not: only this node's endpoint through the NodePort, masqueraded to the ClusterIP.
        assert.deepEqual([...(await viaNodePort(outsider))], ["local"]);
        const fromOutsider = await probeOneFrom(outsider.ns, tcp(CLUSTER_IP, 80));
        assert.ok(fromOutsider.ok);
        assert.notEqual(
          fromOutsider.reply?.client.address,
          outsider.ipv4,
          "off-cluster traffic to a ClusterIP is masqueraded",
        );
      });
});
