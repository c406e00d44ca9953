// --detect-local-mode end to end: real traffic from pods in network namespaces through the nft,
// iptables and eBPF backends. Only a pod that the mode detects as local takes the eTP Local
// short-circuit (its connections to a NodePort reach the endpoint on another node too) and keeps
// its address on ClusterIP traffic; any other source is masqueraded to a ClusterIP and reaches
// only this node's endpoint through the NodePort.
//
// Pods: the topology's client (a pod of this node), "local" (the endpoint on node-1), "remote"
// (the endpoint "on node-2") and "outsider" (not detected as a pod of this node).
//
// to-ebpf balances a socket of its cgroup tree at connect(): such a socket is this node's own,
// known local whatever the mode, as kube-proxy treats traffic the node itself originates. The
// detector decides only for the packets its nft companion serves, those of sockets outside the
// tree (here: the same pods without joining it), and there it must decide exactly as to-nft.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { outcome, probeFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import {
  ebpfSkipReason,
  netnsSkipReason,
  type Pod,
  suiteTopology,
  type Topology,
} from "../../support/netns.ts";
import { suiteEbpfSetup } from "./backends.ts";
import { kpngArgv, type TestService, writeCluster } from "./cluster.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();
const ebpfSkip = skip || (await ebpfSkipReason());
const echo = { tcpPorts: [8080] };
const CLUSTER_IP = "203.0.113.30";
const NODE_PORT = 30930;
/** Enough tries that a 1-in-2 draw misses the remote endpoint with probability 2^-16. */
const TRIES = 16;

/** Each mode with flags under which the client, and not the outsider, is detected as a pod of this node. */
const MODES = [
  {
    mode: "ClusterCIDR",
    // The cluster's pod range, as far as sources go: the client's address and nobody else's.
    flags: (topo: Topology) => [
      "--detect-local-mode",
      "ClusterCIDR",
      "--cluster-cidr",
      `${topo.client.ipv4}/32`,
    ],
    node1PodCIDRs: () => undefined,
  },
  {
    mode: "NodeCIDR",
    flags: () => ["--detect-local-mode", "NodeCIDR"],
    // node-1's spec.podCIDRs hold the client and the local endpoint, not the outsider.
    node1PodCIDRs: (topo: Topology) => [`${topo.client.ipv4}/32`, `${topo.pod("local").ipv4}/32`],
  },
  {
    mode: "BridgeInterface",
    // The rule matches the input interface by its exact name: the client's node-side veth
    // stands in for the bridge that a bridged CNI would put its pods behind.
    flags: (topo: Topology) => [
      "--detect-local-mode",
      "BridgeInterface",
      "--pod-bridge-interface",
      topo.client.hostInterface,
    ],
    node1PodCIDRs: () => undefined,
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

  /** The endpoints a pod reaches through the NodePort, from inside `cgroup` when given. */
  const viaNodePort = async (from: Pod, cgroup?: string) =>
    [
      ...new Set(
        (
          await probeFrom(
            from.ns,
            Array.from({ length: TRIES }, () => tcp(env.topology.nodeIPv4, NODE_PORT)),
            { concurrency: 4, cgroup },
          )
        ).map(outcome),
      ),
    ].sort();

  /** The source address the endpoint saw for a pod's connection to the ClusterIP. */
  const seenAtClusterIP = async (from: Pod, cgroup?: string) => {
    const [r] = await probeFrom(from.ns, [tcp(CLUSTER_IP, 80)], { cgroup });
    assert.ok(r?.ok, r && outcome(r));
    return r.reply?.client.address;
  };

  /** Starts kpng with the mode's flags; stops it and cleans up after the test. */
  async function start(
    t: { after(fn: () => Promise<void>): void },
    name: string,
    sink: readonly string[],
    cleanup: readonly string[],
    m: (typeof MODES)[number],
    cgroup?: string,
  ): Promise<void> {
    const topo = env.topology;
    const file = join(dir, `${name}-${m.mode}.yaml`);
    const node1PodCIDRs = m.node1PodCIDRs(topo);
    writeCluster(file, [service()], { ...(node1PodCIDRs && { node1PodCIDRs }) });
    const kpng = topo.node.spawn(kpngArgv(MAIN, file, sink, m.flags(topo)), { name: "kpng" });
    t.after(async () => {
      await kpng.stop();
      await topo.node.exec([process.execPath, MAIN, "cleanup", ...cleanup]);
    });
    // to-ebpf starts its nft companion after the maps' first sync: wait for both paths.
    for (const from of cgroup === undefined ? [undefined] : [cgroup, undefined])
      await eventually(
        async () =>
          (await probeFrom(topo.client.ns, [tcp(CLUSTER_IP, 80)], { cgroup: from }))[0]?.ok === true,
        "kpng to program the first state",
        60_000,
      );
  }

  /** What the detector decides, for packets that the rules (not a socket program) serve. */
  async function detectorDecides(): Promise<void> {
    const { client } = env.topology;
    const outsider = env.topology.pod("outsider");
    // The client is a pod of this node: short-circuited to every endpoint, its address kept.
    assert.deepEqual(await viaNodePort(client), ["local", "remote"]);
    assert.equal(await seenAtClusterIP(client), client.ipv4, "pod traffic to a ClusterIP is not masqueraded");
    // The outsider is not: only this node's endpoint through the NodePort, masqueraded to the ClusterIP.
    assert.deepEqual(await viaNodePort(outsider), ["local"]);
    assert.notEqual(
      await seenAtClusterIP(outsider),
      outsider.ipv4,
      "off-cluster traffic to a ClusterIP is masqueraded",
    );
  }

  for (const backend of [
    { name: "nft", sink: ["to-nft"] },
    { name: "iptables", sink: ["to-iptables", "--iptables-mode", "nft"] },
  ])
    for (const m of MODES)
      test(`${backend.name}, ${m.mode}: pod→eTP Local NodePort and masquerade follow the detector`, async (t) => {
        await start(t, backend.name, backend.sink, [backend.sink[0]!.replace("to-", "")], m);
        await detectorDecides();
      });

  describe("eBPF", { skip: ebpfSkip }, () => {
    const mounts = suiteEbpfSetup();

    for (const m of MODES)
      test(`ebpf, ${m.mode}: the companion follows the detector; the cgroup's sockets are the node's own`, async (t) => {
        const flags = mounts.setup?.flags ?? [];
        const cgroup = mounts.setup?.clientCgroup;
        await start(t, "ebpf", ["to-ebpf", ...flags], ["ebpf", ...flags], m, cgroup);
        // Outside the balanced cgroup: the nft companion serves the pods' packets, as to-nft.
        await detectorDecides();
        // Inside it: balanced at connect() to every endpoint, never masqueraded, for the detected
        // client and the outsider alike (to-nft short-circuits the node's own sources too, and
        // masquerades them where to-ebpf lets the endpoint see the client's own address). The
        // outsider shows that the programs did it: through the companion it reaches "local" only.
        for (const pod of [env.topology.client, env.topology.pod("outsider")]) {
          assert.deepEqual(await viaNodePort(pod, cgroup), ["local", "remote"], pod.name);
          assert.equal(await seenAtClusterIP(pod, cgroup), pod.ipv4, pod.name);
        }
      });
  });
});
