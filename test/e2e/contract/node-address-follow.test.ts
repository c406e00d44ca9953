// The node's addresses are followed while kpng runs, and the rules that name them are updated
// in place (the same kpng process, no restart), with real TCP:
// - iptables, NodePorts on the primary addresses (the default-route interface): an address added
//   to that interface takes NodePort traffic; removed, it stops;
// - nft, "primary" NodePorts from the Node object: the Node's InternalIP changes, and the
//   NodePort moves to the new address;
// - eBPF, NodePorts in a CIDR: an address added inside it takes NodePort connections from the
//   node's own sockets (balanced by the programs, through the NodePort address map);
// - the `ip monitor` that says when to re-read, killed: logged, restarted, and still followed.

import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { outcome, probeFrom, probeOneFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import { ebpfSkipReason, netnsSkipReason, type Spawned, suiteTopology } from "../../support/netns.ts";
import { httpGet } from "../node/http-get.ts";
import { suiteEbpfSetup } from "./backends.ts";
import { kpngArgv, type TestService, writeCluster } from "./cluster.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();
const ebpfSkip = skip || (await ebpfSkipReason());
const NODE_PORT = 30932;
const HEALTH_PORT = 30933;
/** An address of the node's link that the node does not hold at start. */
const ADDED = "192.0.2.7";
/** The addresses are re-read at an `ip monitor` event (the safety net reads every 60 s); then one sync. */
const FOLLOWED_MS = 20_000;

describe("the node's addresses are followed in place", { skip }, () => {
  const env = suiteTopology({ pods: [{ name: "web", echo: { tcpPorts: [8080] } }] });
  const dir = mkdtempSync(join(tmpdir(), "kpng-address-follow-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  const service = (): TestService => ({
    name: "web",
    type: "NodePort",
    clusterIP: "203.0.113.32",
    ports: [{ name: "http", port: 80, targetPort: 8080, nodePort: NODE_PORT }],
    endpoints: [{ ip: env.topology.pod("web").ipv4!, node: "node-1" }],
  });

  /** Starts kpng in the node; stops it, removes the added address and cleans up after the test. */
  function start(
    t: { after(fn: () => Promise<void>): void },
    file: string,
    sink: readonly string[],
    cleanup: readonly string[],
    flags: readonly string[],
  ): Spawned {
    const topo = env.topology;
    // The last --nodeport-addresses given wins.
    const kpng = topo.node.spawn(kpngArgv(MAIN, file, sink, flags), { name: "kpng" });
    t.after(async () => {
      await kpng.stop();
      await topo.node.exec(["ip", "address", "del", `${ADDED}/24`, "dev", "ext0"]).catch(() => {});
      await topo.node.exec([process.execPath, MAIN, "cleanup", ...cleanup]);
    });
    return kpng;
  }

  const fromOutside = async (ip: string) =>
    outcome(await probeOneFrom(env.topology.external, tcp(ip, NODE_PORT, 500)));

  /** The processes `pid` started that still run. */
  const childrenOf = (pid: number): number[] =>
    readdirSync(`/proc/${pid}/task`).flatMap((task) =>
      readFileSync(`/proc/${pid}/task/${task}/children`, "utf8")
        .trim()
        .split(" ")
        .filter(Boolean)
        .map(Number),
    );
  const commandLine = (pid: number): string => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
    } catch {
      return "";
    }
  };

  /** Fails the test if kpng exited (a restart would be an exit). */
  const stillRunning = async (kpng: Spawned) => {
    const exited = await Promise.race([kpng.exited, new Promise((r) => setTimeout(() => r(undefined), 0))]);
    assert.equal(exited, undefined, "kpng kept running: the rules were updated in place");
  };

  test("iptables: an address added to the default-route interface takes NodePort traffic; removed, it stops", async (t) => {
    const topo = env.topology;
    const file = join(dir, "iptables.yaml");
    writeCluster(file, [service()]);
    const kpng = start(
      t,
      file,
      ["to-iptables", "--iptables-mode", "nft"],
      ["iptables"],
      ["--nodeport-addresses", "primary"],
    );
    await eventually(async () => (await fromOutside(topo.nodeIPv4)) === "web", "the first state", 60_000);
    assert.notEqual(await fromOutside(ADDED), "web", "not an address of the node yet");

    await topo.node.exec(["ip", "address", "add", `${ADDED}/24`, "dev", "ext0"]);
    await eventually(
      async () => (await fromOutside(ADDED)) === "web",
      `the NodePort on ${ADDED}`,
      FOLLOWED_MS,
    );
    assert.equal(await fromOutside(topo.nodeIPv4), "web", "the address that stays still answers");

    await topo.node.exec(["ip", "address", "del", `${ADDED}/24`, "dev", "ext0"]);
    await eventually(
      async () => (await fromOutside(ADDED)) !== "web",
      `the NodePort gone from ${ADDED}`,
      FOLLOWED_MS,
    );
    assert.equal(await fromOutside(topo.nodeIPv4), "web");
    await stillRunning(kpng);
  });

  test("nft: the Node's InternalIP changes and the primary NodePort moves to it, without a restart", async (t) => {
    const topo = env.topology;
    const file = join(dir, "nft.yaml");
    writeCluster(file, [service()]);
    await topo.node.exec(["ip", "address", "add", `${ADDED}/24`, "dev", "ext0"]);
    const kpng = start(t, file, ["to-nft"], ["nft"], ["--nodeport-addresses", "primary"]);
    await eventually(async () => (await fromOutside(topo.nodeIPv4)) === "web", "the first state", 60_000);
    assert.notEqual(await fromOutside(ADDED), "web", "a local address, but not the Node's");

    writeCluster(file, [service()], { node1IPv4: ADDED });
    await eventually(
      async () => (await fromOutside(ADDED)) === "web",
      `the NodePort on ${ADDED}`,
      FOLLOWED_MS,
    );
    await eventually(
      async () => (await fromOutside(topo.nodeIPv4)) !== "web",
      "the NodePort gone from the old InternalIP",
      FOLLOWED_MS,
    );
    await stillRunning(kpng);
  });

  test("nft, NodeCIDR: the Node's podCIDRs change and the table follows, without a restart", async (t) => {
    const topo = env.topology;
    const file = join(dir, "node-cidr.yaml");
    writeCluster(file, [service()], { node1PodCIDRs: ["198.51.100.0/25"] });
    const kpng = start(t, file, ["to-nft"], ["nft"], ["--detect-local-mode", "NodeCIDR"]);
    const podCIDRs = async () =>
      (await topo.node.exec(["nft", "list", "set", "ip", "kpng", "pod-cidrs"]).catch(() => ({ stdout: "" })))
        .stdout;
    await eventually(
      async () => (await podCIDRs()).includes("198.51.100.0/25"),
      "the first podCIDRs",
      60_000,
    );
    writeCluster(file, [service()], { node1PodCIDRs: ["198.51.100.128/25"] });
    await eventually(
      async () => (await podCIDRs()).includes("198.51.100.128/25"),
      "the new podCIDRs",
      FOLLOWED_MS,
    );
    assert.doesNotMatch(await podCIDRs(), /198\.51\.100\.0\/25/);
    assert.equal(await fromOutside(topo.nodeIPv4), "web", "NodePorts kept answering");
    await stillRunning(kpng);
  });

  test("nft: a healthCheckNodePort opens on an address added inside the NodePort CIDR, and closes when it goes", async (t) => {
    const topo = env.topology;
    const file = join(dir, "health.yaml");
    const lb: TestService = {
      ...service(),
      type: "LoadBalancer",
      externalTrafficPolicy: "Local",
      healthCheckNodePort: HEALTH_PORT,
    };
    writeCluster(file, [lb]);
    const kpng = start(t, file, ["to-nft"], ["nft"], ["--nodeport-addresses", "192.0.2.0/24"]);
    const health = (ip: string) => httpGet(topo.external, `http://${ip}:${HEALTH_PORT}/healthz`);
    await eventually(async () => (await health(topo.nodeIPv4)).status === 200, "the first state", 60_000);
    assert.ok((await health(ADDED)).error, "not an address of the node yet");

    await topo.node.exec(["ip", "address", "add", `${ADDED}/24`, "dev", "ext0"]);
    await eventually(async () => (await health(ADDED)).status === 200, `the server on ${ADDED}`, FOLLOWED_MS);
    assert.equal((await health(topo.nodeIPv4)).status, 200, "the address that stays still answers");
    await topo.node.exec(["ip", "address", "del", `${ADDED}/24`, "dev", "ext0"]);
    // A socket bound to a removed address still listens: the server must close it.
    const listeners = async () => (await topo.node.exec(["ss", "-Hltn", `sport = :${HEALTH_PORT}`])).stdout;
    await eventually(
      async () => !(await listeners()).includes(ADDED),
      `the server on ${ADDED} closed`,
      FOLLOWED_MS,
    );
    assert.match(await listeners(), new RegExp(topo.nodeIPv4.replaceAll(".", "\\.")));
    assert.equal((await health(topo.nodeIPv4)).status, 200);
    await stillRunning(kpng);
  });

  test("nft: the ip monitor killed is logged and restarted, and an address added after is followed", async (t) => {
    const topo = env.topology;
    const file = join(dir, "monitor.yaml");
    writeCluster(file, [service()]);
    const kpng = start(t, file, ["to-nft"], ["nft"], ["--nodeport-addresses", "192.0.2.0/24"]);
    await eventually(async () => (await fromOutside(topo.nodeIPv4)) === "web", "the first state", 60_000);
    const monitors = () => childrenOf(kpng.pid).filter((pid) => commandLine(pid).includes("monitor"));
    await eventually(async () => monitors().length === 1, "kpng's ip monitor");
    const [first] = monitors();
    process.kill(first ?? 0, "SIGKILL");
    await kpng.waitForLine(/the monitor of the node's addresses stopped/, FOLLOWED_MS);
    await eventually(
      async () => monitors().length === 1 && monitors()[0] !== first,
      "a new ip monitor",
      FOLLOWED_MS,
    );

    await topo.node.exec(["ip", "address", "add", `${ADDED}/24`, "dev", "ext0"]);
    await eventually(
      async () => (await fromOutside(ADDED)) === "web",
      `the NodePort on ${ADDED}`,
      FOLLOWED_MS,
    );
    await stillRunning(kpng);
  });

  describe("eBPF", { skip: ebpfSkip }, () => {
    const mounts = suiteEbpfSetup();

    test("an address added inside the NodePort CIDR takes the node's own connections; removed, it stops", async (t) => {
      const topo = env.topology;
      const file = join(dir, "ebpf.yaml");
      writeCluster(file, [service()]);
      const setupFlags = mounts.setup?.flags ?? [];
      const flags = [...setupFlags, "--nodeport-addresses", "192.0.2.0/24"];
      const kpng = start(t, file, ["to-ebpf"], ["ebpf", ...setupFlags], flags);
      const fromNode = async (ip: string) => {
        const [r] = await probeFrom(topo.node, [tcp(ip, NODE_PORT, 500)], {
          cgroup: mounts.setup?.clientCgroup,
        });
        return r ? outcome(r) : "none";
      };
      await eventually(async () => (await fromNode(topo.nodeIPv4)) === "web", "the first state", 60_000);
      assert.notEqual(await fromNode(ADDED), "web", "not an address of the node yet");

      await topo.node.exec(["ip", "address", "add", `${ADDED}/24`, "dev", "ext0"]);
      await eventually(
        async () => (await fromNode(ADDED)) === "web",
        `the NodePort on ${ADDED}`,
        FOLLOWED_MS,
      );
      assert.equal(await fromOutside(ADDED), "web", "and from outside (the nft rules)");

      await topo.node.exec(["ip", "address", "del", `${ADDED}/24`, "dev", "ext0"]);
      await eventually(
        async () => (await fromNode(ADDED)) !== "web",
        `the NodePort gone from ${ADDED}`,
        FOLLOWED_MS,
      );
      assert.equal(await fromNode(topo.nodeIPv4), "web");
      await stillRunning(kpng);
    });
  });
});
