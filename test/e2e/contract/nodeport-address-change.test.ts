// NodePort addresses given as CIDRs follow the node's interfaces without a restart: the rules
// match "a local address in these CIDRs" (nft `fib daddr type local`, iptables `addrtype
// LOCAL`), so an address added after kpng started takes NodePort traffic at once, and one
// removed stops taking it. Real TCP from the external client, nft, iptables and eBPF.
//
// to-ebpf serves the external client with its nft companion (the same rules, at once); its own
// NodePort entries, which balance the node's sockets at connect(), name each address and are
// rewritten when the addresses are next read (every 5 s), so the node's own connections follow
// within one read and one sync.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { outcome, probeFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import { ebpfSkipReason, type Netns, netnsSkipReason, suiteTopology } from "../../support/netns.ts";
import { suiteEbpfSetup } from "./backends.ts";
import { type TestService, writeCluster } from "./cluster.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();
const ebpfSkip = skip || (await ebpfSkipReason());
const NODE_PORT = 30931;
/** An address of the node's link that the node does not hold at start. */
const ADDED = "192.0.2.7";
/** The rules match local addresses: they follow at once. */
const AT_ONCE_MS = 5_000;
/** The node's addresses are re-read every 5 s; then one sync (a loaded machine). */
const NEXT_READ_MS = 20_000;

describe("NodePort CIDRs follow the node's addresses", { skip }, () => {
  const env = suiteTopology({ pods: [{ name: "web", echo: { tcpPorts: [8080] } }] });
  const dir = mkdtempSync(join(tmpdir(), "kpng-nodeport-address-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** The endpoint (or the failure) that a connection from `ns`, inside `cgroup` if given, reaches. */
  const viaNodePort = async (ns: Netns, ip: string, cgroup?: string) => {
    const [r] = await probeFrom(ns, [tcp(ip, NODE_PORT, 500)], { cgroup });
    return r ? outcome(r) : "none";
  };
  const fromOutside = (ip: string) => viaNodePort(env.topology.external, ip);

  /** Starts kpng; stops it, removes the added address and cleans up after the test. */
  async function start(
    t: { after(fn: () => Promise<void>): void },
    name: string,
    sink: readonly string[],
    cleanup: readonly string[],
  ): Promise<void> {
    const topo = env.topology;
    const file = join(dir, `${name}.yaml`);
    const svc: TestService = {
      name: "web",
      type: "NodePort",
      clusterIP: "203.0.113.31",
      ports: [{ name: "http", port: 80, targetPort: 8080, nodePort: NODE_PORT }],
      endpoints: [{ ip: topo.pod("web").ipv4!, node: "node-1" }],
    };
    writeCluster(file, [svc]);
    const argv = [process.execPath, MAIN, "file", "--input", file, "to-local", ...sink];
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
      await topo.node.exec([process.execPath, MAIN, "cleanup", ...cleanup]);
    });
    await eventually(
      async () => (await fromOutside(topo.nodeIPv4)) === "web",
      "kpng to program the first state",
      60_000,
    );
    assert.notEqual(await fromOutside(ADDED), "web", "not an address of the node yet");
  }

  const addAddress = () => env.topology.node.exec(["ip", "address", "add", `${ADDED}/24`, "dev", "ext0"]);
  const removeAddress = () => env.topology.node.exec(["ip", "address", "del", `${ADDED}/24`, "dev", "ext0"]);

  for (const backend of [
    { name: "nft", sink: ["to-nft"] },
    { name: "iptables", sink: ["to-iptables", "--iptables-mode", "nft"] },
  ])
    test(`${backend.name}: an address added after start takes NodePort traffic; removed, it stops`, async (t) => {
      await start(t, backend.name, backend.sink, [backend.sink[0]!.replace("to-", "")]);
      await addAddress();
      await eventually(
        async () => (await fromOutside(ADDED)) === "web",
        `the NodePort on ${ADDED}`,
        AT_ONCE_MS,
      );
      await removeAddress();
      // The external client may still hold the node's MAC for it: the node no longer takes it.
      await eventually(
        async () => (await fromOutside(ADDED)) !== "web",
        `the NodePort gone from ${ADDED}`,
        AT_ONCE_MS,
      );
    });

  describe("eBPF", { skip: ebpfSkip }, () => {
    const mounts = suiteEbpfSetup();

    test("ebpf: an added address takes NodePort traffic from outside at once and the node's own within a read; removed, both stop", async (t) => {
      const flags = mounts.setup?.flags ?? [];
      const fromNode = (ip: string) => viaNodePort(env.topology.node, ip, mounts.setup?.clientCgroup);
      await start(t, "ebpf", ["to-ebpf", ...flags], ["ebpf", ...flags]);
      await eventually(
        async () => (await fromNode(env.topology.nodeIPv4)) === "web",
        "the programs' first state",
        60_000,
      );
      assert.notEqual(await fromNode(ADDED), "web", "not an address of the node yet");

      await addAddress();
      await eventually(
        async () => (await fromOutside(ADDED)) === "web",
        `the NodePort on ${ADDED}`,
        AT_ONCE_MS,
      );
      await eventually(
        async () => (await fromNode(ADDED)) === "web",
        `the node's own to ${ADDED}`,
        NEXT_READ_MS,
      );

      await removeAddress();
      await eventually(
        async () => (await fromOutside(ADDED)) !== "web",
        `the NodePort gone from ${ADDED}`,
        AT_ONCE_MS,
      );
      await eventually(
        async () => (await fromNode(ADDED)) !== "web",
        `the node's own to ${ADDED} gone`,
        NEXT_READ_MS,
      );
      assert.equal(await fromNode(env.topology.nodeIPv4), "web", "the address that stays still answers");
      assert.equal(await fromOutside(env.topology.nodeIPv4), "web");
    });
  });
});
