// Tests of the network-namespace harness itself, without kpng: pods answer directly, failures are
// classified, and nothing is left behind.

import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { outcome, probeFrom } from "../../support/client.ts";
import { ECHO_SERVER_SCRIPT } from "../../support/echo-server.ts";
import {
  CLIENT_POD,
  EXTERNAL_IPV4,
  EXTERNAL_IPV6,
  Netns,
  netnsSkipReason,
  ownNamespaces,
  removeLeftoverNamespaces,
  runCommand,
  Spawned,
  suiteTopology,
  Topology,
  testTopology,
} from "../../support/netns.ts";

const skip = await netnsSkipReason();

async function namespaceExists(name: string): Promise<boolean> {
  const { stdout } = await runCommand(["ip", "netns", "list"]);
  return stdout.split("\n").some((line) => line.split(" ")[0] === name);
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("netns harness: traffic", { skip }, () => {
  const env = suiteTopology({
    pods: [
      { name: "web-1", echo: { tcpPorts: [8080, 8081], udpPorts: [5353] } },
      { name: "web-2", addresses: ["198.51.100.42"], echo: { tcpPorts: [8080] } },
    ],
  });
  let topo: Topology;
  before(() => {
    topo = env.topology;
  });

  test("a pod's echo server answers the client pod over TCP and UDP, IPv4 and IPv6", async () => {
    const web1 = topo.pod("web-1");
    const results = await probeFrom(topo.client.ns, [
      { proto: "tcp", host: web1.ipv4!, port: 8080 },
      { proto: "tcp", host: web1.ipv4!, port: 8081 },
      { proto: "tcp", host: web1.ipv6!, port: 8080 },
      { proto: "udp", host: web1.ipv4!, port: 5353 },
      { proto: "udp", host: web1.ipv6!, port: 5353 },
    ]);
    assert.deepEqual(results.map(outcome), ["web-1", "web-1", "web-1", "web-1", "web-1"]);
    const seen = results.map((r) => (r.ok ? r.reply?.client.address : r.message));
    assert.deepEqual(seen, [
      CLIENT_POD.ipv4,
      CLIENT_POD.ipv4,
      CLIENT_POD.ipv6,
      CLIENT_POD.ipv4,
      CLIENT_POD.ipv6,
    ]);
    const first = results[0];
    assert.ok(first?.ok);
    assert.deepEqual(first.reply?.server, { address: web1.ipv4, port: 8080 });
  });

  test("the external client reaches pods through the node, which forwards without NAT", async () => {
    const results = await probeFrom(topo.external, [
      { proto: "tcp", host: topo.pod("web-1").ipv4!, port: 8080 },
      { proto: "tcp", host: topo.pod("web-1").ipv6!, port: 8080 },
      { proto: "udp", host: topo.pod("web-1").ipv6!, port: 5353 },
      { proto: "tcp", host: "198.51.100.42", port: 8080 },
    ]);
    assert.deepEqual(results.map(outcome), ["web-1", "web-1", "web-1", "web-2"]);
    assert.deepEqual(
      results.map((r) => (r.ok ? r.reply?.client.address : undefined)),
      [EXTERNAL_IPV4, EXTERNAL_IPV6, EXTERNAL_IPV6, EXTERNAL_IPV4],
    );
  });

  test("an IPv4-only pod gets no IPv6 address", () => {
    const web2 = topo.pod("web-2");
    assert.equal(web2.ipv4, "198.51.100.42");
    assert.equal(web2.ipv6, undefined);
  });

  test("a closed port is refused (TCP RST, UDP port unreachable), a blackholed address times out", async () => {
    await topo.node.ip(["route", "add", "blackhole", "203.0.113.99/32"]);
    const web1 = topo.pod("web-1").ipv4!;
    const results = await probeFrom(topo.client.ns, [
      { proto: "tcp", host: web1, port: 9 },
      { proto: "udp", host: web1, port: 9 },
      { proto: "tcp", host: "203.0.113.99", port: 80, timeoutMs: 300 },
      { proto: "udp", host: "203.0.113.99", port: 53, timeoutMs: 300 },
    ]);
    assert.deepEqual(results.map(outcome), ["refused", "refused", "timeout", "timeout"]);
    // Refused comes back at once; a timeout takes its full time.
    assert.ok(
      results.slice(0, 2).every((r) => r.ms < 250),
      JSON.stringify(results),
    );
    assert.ok(
      results.slice(2).every((r) => r.ms >= 290),
      JSON.stringify(results),
    );
  });

  test("a UDP connect() that fails is a failed probe, not a crash of the prober", async () => {
    // An unreachable route fails connect() itself, as a socket balancer's refusal does (to-ebpf).
    await topo.client.ns.ip(["route", "add", "unreachable", "203.0.113.97/32"]);
    const [r] = await probeFrom(topo.client.ns, [{ proto: "udp", host: "203.0.113.97", port: 53 }]);
    assert.equal(r && outcome(r), "unreachable");
  });

  test("an ICMP host unreachable is reported as unreachable, which is neither refused nor timeout", async () => {
    await topo.node.ip(["route", "add", "unreachable", "203.0.113.98/32"]);
    const [result] = await probeFrom(topo.client.ns, [{ proto: "tcp", host: "203.0.113.98", port: 80 }]);
    assert.equal(result && outcome(result), "unreachable");
  });

  test("a Service IP that no rule catches goes to the node's router and is dropped there", async () => {
    const results = await probeFrom(topo.client.ns, [
      { proto: "tcp", host: "203.0.113.200", port: 80, timeoutMs: 300 },
      { proto: "tcp", host: "2001:db8:2::200", port: 80, timeoutMs: 300 },
      { proto: "udp", host: "203.0.113.200", port: 53, timeoutMs: 300 },
    ]);
    assert.deepEqual(results.map(outcome), ["timeout", "timeout", "timeout"]);
  });

  test("the client can bind its source port", async () => {
    const [result] = await probeFrom(topo.client.ns, [
      { proto: "tcp", host: topo.pod("web-1").ipv4!, port: 8080, localPort: 40123 },
    ]);
    assert.ok(result?.ok, JSON.stringify(result));
    assert.equal(result.reply?.client.port, 40123);
  });

  test("a batch of 300 requests runs in one process, in request order", async () => {
    const hosts = [topo.pod("web-1").ipv4!, "198.51.100.42"];
    const requests = Array.from({ length: 300 }, (_, i) => ({
      proto: "tcp" as const,
      host: hosts[i % 2]!,
      port: 8080,
    }));
    const started = performance.now();
    const results = await probeFrom(topo.client.ns, requests);
    const ms = performance.now() - started;
    assert.deepEqual(
      results.map(outcome),
      requests.map((_, i) => (i % 2 === 0 ? "web-1" : "web-2")),
    );
    assert.ok(ms < 5_000, `300 requests took ${Math.round(ms)} ms`);
  });

  test("a pod can be added and removed while the topology runs", async () => {
    const pod = await topo.addPod({ name: "late", echo: { tcpPorts: [80] } });
    const [before] = await probeFrom(topo.client.ns, [{ proto: "tcp", host: pod.ipv4!, port: 80 }]);
    assert.equal(before && outcome(before), "late");
    await topo.removePod("late");
    assert.equal(await namespaceExists(pod.ns.name), false);
    assert.equal(processAlive(pod.echo!.pid), false);
  });

  test("bad pod specs are rejected before anything is created", async () => {
    const before = await ownNamespaces();
    await assert.rejects(topo.addPod({ name: "real-net", addresses: ["10.1.2.3"] }), /documentation range/);
    await assert.rejects(topo.addPod({ name: "dup", addresses: ["198.51.100.42"] }), /already used/);
    await assert.rejects(topo.addPod({ name: "web-1" }), /already exists/);
    await assert.rejects(topo.addPod({ name: "gw", addresses: ["198.51.100.1"] }), /reserved/);
    assert.deepEqual(await ownNamespaces(), before);
  });

  test("a failing echo server fails addPod with its output and leaves no namespace", async () => {
    const before = await ownNamespaces();
    // The echo script rejects port 0; the error must carry the script's own message.
    await assert.rejects(topo.addPod({ name: "bad-port", echo: { tcpPorts: [0] } }), /bad port 0/);
    assert.deepEqual(await ownNamespaces(), before);
  });
});

describe("netns harness: node addresses", { skip }, () => {
  test("the node's addresses can be chosen, and the external client reaches them directly", async (t) => {
    const topo = await testTopology(t, { nodeIPv4: "192.0.2.11", nodeIPv6: "2001:db8::11" });
    const echo = topo.node.spawn([process.execPath, ECHO_SERVER_SCRIPT, "--name", "node", "--port", "30080"]);
    await echo.waitForLine(/^listening /);
    const results = await probeFrom(topo.external, [
      { proto: "tcp", host: "192.0.2.11", port: 30080 },
      { proto: "tcp", host: "2001:db8::11", port: 30080 },
    ]);
    assert.deepEqual(results.map(outcome), ["node", "node"]);
  });

  test("a node address outside the external link is rejected before anything is created", async () => {
    const before = await ownNamespaces();
    await assert.rejects(Topology.create({ nodeIPv4: "198.51.100.5" }), /must be in 192.0.2.0\/24/);
    await assert.rejects(Topology.create({ nodeIPv6: EXTERNAL_IPV6 }), /differ from the external client/);
    assert.deepEqual(await ownNamespaces(), before);
  });
});

describe("netns harness: cleanup", { skip }, () => {
  test("testTopology() destroys its topology when the test ends", async () => {
    let names: string[] = [];
    await test("inner", async (t) => {
      const topo = await testTopology(t);
      names = [topo.node.name, topo.external.name, topo.client.ns.name];
      for (const name of names) assert.ok(await namespaceExists(name), name);
    });
    assert.equal(names.length, 3);
    for (const name of names) assert.equal(await namespaceExists(name), false, name);
  });

  test("destroy() stops every process and deletes every namespace", async () => {
    const topo = await Topology.create({ pods: [{ name: "web", echo: { tcpPorts: [8080] } }] });
    const names = [topo.node.name, topo.external.name, ...topo.pods.map((p) => p.ns.name)];
    const echoPid = topo.pod("web").echo!.pid;
    assert.equal(names.length, 4);
    for (const name of names) assert.ok(await namespaceExists(name), name);
    assert.ok(processAlive(echoPid));

    await topo.destroy();
    for (const name of names) assert.equal(await namespaceExists(name), false, name);
    assert.equal(processAlive(echoPid), false);
    await topo.destroy(); // a second call is harmless
  });

  test("destroy() also kills processes that were not spawned through the harness", async () => {
    const ns = await Netns.create();
    const stray = new Spawned(["ip", "netns", "exec", ns.name, "sleep", "60"]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(await ns.pids(), [stray.pid]);
    await ns.destroy();
    const exit = await stray.exited;
    assert.equal(exit.signal, "SIGKILL");
    assert.equal(await namespaceExists(ns.name), false);
  });

  for (const how of ["SIGTERM", "exit"] as const) {
    test(`a process that ends by ${how} without destroy() leaves nothing behind`, async () => {
      const script = fileURLToPath(new URL("./leaky-topology.ts", import.meta.url));
      const child = new Spawned([process.execPath, script, ...(how === "exit" ? ["exit"] : [])]);
      const line = await child.waitForLine(/^namespaces /, 20_000);
      const names = JSON.parse(line.slice("namespaces ".length)) as string[];
      assert.equal(names.length, 4);
      if (how === "SIGTERM") await child.stop(5_000);
      const exit = await child.exited;
      assert.equal(exit.code, how === "SIGTERM" ? 128 + 15 : 3, child.describe());
      for (const name of names) assert.equal(await namespaceExists(name), false, name);
    });
  }

  test("the janitor deletes namespaces of dead processes and keeps those of live ones", async () => {
    const gone = new Spawned(["true"]);
    await gone.exited;
    const leftover = `kpt-${gone.pid}-1`;
    await runCommand(["ip", "netns", "add", leftover]);
    const mine = await Netns.create();
    try {
      const removed = await removeLeftoverNamespaces();
      assert.ok(removed.includes(leftover), JSON.stringify(removed));
      assert.equal(await namespaceExists(leftover), false);
      assert.equal(await namespaceExists(mine.name), true);
    } finally {
      await mine.destroy();
      await runCommand(["ip", "netns", "del", leftover], { allowFailure: true });
    }
  });
});
