// The eBPF backend end to end: the real CLI (`kpng file … to-local to-ebpf`) in a node namespace,
// its programs attached to a cgroup of the test's own mount, a client pod that joins the cgroup
// before entering its namespace, real TCP and UDP. The connections are balanced by the programs,
// not by nft: the node's conntrack never sees the Service address.

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { createMapRef, objGet, RawMap } from "bpf";
import { mapPinPath, pinnedMapLayout } from "../../../src/backends/ebpf/maps.ts";
import { connectedThrough, udpDestroyPins } from "../../../src/backends/ebpf/udp-destroy.ts";
import { outcome, type ProbeRequest, probeFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import {
  type BpfMounts,
  ebpfSkipReason,
  mountBpf,
  pinForeignMap,
  type Spawned,
  suiteTopology,
} from "../../support/netns.ts";
import { type TestService, writeCluster } from "../contract/cluster.ts";
import { httpGet } from "../node/http-get.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const UDP_CLIENT = fileURLToPath(new URL("../../../tools/netns/udp-connected-client.ts", import.meta.url));
const skip = await ebpfSkipReason();
const echo = { tcpPorts: [8080], udpPorts: [5353] };
const http = [{ name: "http", port: 80, targetPort: 8080 }];
/** One pod with 16 addresses: a list of 16 endpoints, two chunks of the backend map. */
const WIDE = Array.from({ length: 16 }, (_, i) => `198.51.100.${100 + i}`);

describe("eBPF backend", { skip }, () => {
  const env = suiteTopology({
    pods: [
      { name: "web-1", echo },
      { name: "web-2", echo },
      { name: "wide", addresses: WIDE, echo },
    ],
  });
  const dir = mkdtempSync(join(tmpdir(), "kpng-ebpf-e2e-"));
  const file = join(dir, "cluster.yaml");
  let mounts: BpfMounts;
  let kpng: Spawned | undefined;
  let flags: string[];

  function services(over: Partial<Record<string, Partial<TestService>>> = {}): TestService[] {
    const topo = env.topology;
    const on = (pod: string) => ({ ip: topo.pod(pod).ipv4!, node: "node-1" });
    const base: TestService[] = [
      { name: "web", clusterIP: "203.0.113.10", ports: http, endpoints: [on("web-1"), on("web-2")] },
      { name: "empty", clusterIP: "203.0.113.17", ports: http, endpoints: [] },
      {
        name: "dns",
        clusterIP: "203.0.113.18",
        ports: [{ name: "dns", protocol: "UDP", port: 53, targetPort: 5353 }],
        endpoints: [on("web-1"), on("web-2")],
      },
      {
        name: "dns-b",
        clusterIP: "203.0.113.16",
        ports: [{ name: "dns", protocol: "UDP", port: 53, targetPort: 5353 }],
        endpoints: [on("web-1"), on("web-2")],
      },
      {
        name: "dns6",
        clusterIP: "2001:db8:2::18",
        ports: [{ name: "dns", protocol: "UDP", port: 53, targetPort: 5353 }],
        endpoints: [
          { ip: topo.pod("web-1").ipv6!, node: "node-1" },
          { ip: topo.pod("web-2").ipv6!, node: "node-1" },
        ],
      },
      {
        name: "dns-empty",
        clusterIP: "203.0.113.19",
        ports: [{ name: "dns", protocol: "UDP", port: 53, targetPort: 5353 }],
        endpoints: [],
      },
      {
        name: "np",
        type: "NodePort",
        clusterIP: "203.0.113.11",
        ports: [{ ...http[0]!, nodePort: 30080 }],
        endpoints: [on("web-1"), on("web-2")],
      },
      {
        name: "itp-remote",
        clusterIP: "203.0.113.14",
        ports: http,
        internalTrafficPolicy: "Local",
        endpoints: [{ ip: topo.pod("web-2").ipv4!, node: "node-2" }],
      },
      ...(["192.0.2.0/24", "198.18.0.0/15"] as const).map(
        (range, i): TestService => ({
          name: `lb-${i}`,
          type: "LoadBalancer",
          clusterIP: `203.0.113.2${i}`,
          ports: [{ ...http[0]!, nodePort: 30090 + i }],
          loadBalancerIP: `203.0.113.20${i}`,
          sourceRanges: [range],
          endpoints: [on("web-1")],
        }),
      ),
      ...[
        { name: "wide", clusterIP: "203.0.113.30" },
        { name: "wide-sticky", clusterIP: "203.0.113.31", affinitySeconds: 2 },
      ].map(
        (s): TestService => ({ ...s, ports: http, endpoints: WIDE.map((ip) => ({ ip, node: "node-1" })) }),
      ),
      {
        name: "web6",
        clusterIP: "2001:db8:2::10",
        ports: http,
        endpoints: [
          { ip: topo.pod("web-1").ipv6!, node: "node-1" },
          { ip: topo.pod("web-2").ipv6!, node: "node-1" },
        ],
      },
    ];
    return base.map((s) => ({ ...s, ...(over[s.name] ?? {}) }));
  }

  const fromClient = (req: ProbeRequest, n: number) =>
    probeFrom(
      env.topology.client.ns,
      Array.from({ length: n }, () => req),
      { concurrency: 4, cgroup: mounts.clients },
    );
  const names = async (req: ProbeRequest, n: number) => new Set((await fromClient(req, n)).map(outcome));
  const kpngCli = (args: string[], allowFailure = false) =>
    env.topology.node.exec([process.execPath, MAIN, ...args], { allowFailure });
  /** The programs attached to the balanced cgroup, as `bpftool cgroup show` lists them. */
  const attachments = async () => {
    const shown = (
      await env.topology.node.exec(["bpftool", "-j", "cgroup", "show", mounts.clients])
    ).stdout.trim();
    return (shown === "" ? [] : JSON.parse(shown)) as { attach_type: string; name: string }[];
  };
  /** What `kpng ebpf list -o json` prints; empty while there are no maps yet. */
  const listed = async () => {
    const r = await kpngCli(["ebpf", "list", "-o", "json", "--bpf-root", mounts.bpfRoot], true);
    return (r.code === 0 ? JSON.parse(r.stdout) : []) as {
      address: string;
      port: number;
      protocol: string;
      backends: string[];
    }[];
  };

  /** A connected UDP client (tools/netns/udp-connected-client.ts) in the balanced cgroup. */
  const udpClient = (
    address: string,
    port = 53,
    ns: Pick<typeof env.topology.node, "spawn"> = env.topology.node,
  ) =>
    ns.spawn(
      [process.execPath, UDP_CLIENT, "--host", address, "--port", String(port), "--cgroup", mounts.clients],
      { name: "udp-connected-client" },
    );
  /** What a UDP client printed so far: one event per line. */
  const udpEvents = (c: Spawned) =>
    c
      .stdout()
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as { reply?: string; error?: string });
  /** The name of the echo server a UDP client's first reply came from. */
  const firstReply = async (c: Spawned) => JSON.parse(await c.waitForLine(/"reply"/, 10_000)).reply as string;

  /** Waits for the UDP socket iterator's pins (put in place in the background, after the programs). */
  const iteratorPinned = () =>
    eventually(async () => {
      const pins = udpDestroyPins(mounts.bpfRoot);
      return existsSync(pins.iterator) && existsSync(pins.map);
    }, "the UDP socket iterator to be pinned");
  /** Waits until the maps give `address` both endpoints again. */
  const bothEndpointsAgain = (address: string) =>
    eventually(
      async () => (await listed()).find((f) => f.address === address)?.backends.length === 2,
      "both endpoints again",
    );

  const startKpng = (...extra: string[]) =>
    env.topology.node.spawn(
      [
        process.execPath,
        MAIN,
        "file",
        "--input",
        file,
        "to-local",
        "to-ebpf",
        ...flags,
        "--node-name",
        "node-1",
        // Loopback too: 127.0.0.1 serves NodePorts to the node's own sockets (::1 never, as kube-proxy).
        "--nodeport-addresses",
        "192.0.2.1/32,2001:db8::1/128,127.0.0.0/8,::1/128",
        "--cluster-cidr",
        "198.51.100.0/24,2001:db8:1::/64",
        "--min-sync-period",
        "100ms",
        "--healthz-bind-address",
        "",
        "--metrics-bind-address",
        "127.0.0.1:10249",
        ...extra,
      ],
      { name: "kpng", env: { KPNG_LOG_LEVEL: "debug" } },
    );

  before(async () => {
    mounts = await mountBpf();
    flags = ["--bpf-root", mounts.bpfRoot, "--cgroup-root", mounts.clients];
    writeCluster(file, services());
    kpng = startKpng();
    await eventually(async () => (await listed()).length >= 4, "kpng to program the maps");
  });

  after(async () => {
    await kpng?.stop();
    if (process.env.KPNG_E2E_LOGS) console.log(kpng?.stderr());
    await kpngCli(["cleanup", "ebpf", ...flags]).catch(() => undefined);
    await mounts?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the maps hold each Service address with its endpoints", async () => {
    const web = (await listed()).find((f) => f.address === "203.0.113.10");
    assert.deepEqual(web && { ...web, backends: [...web.backends].sort() }, {
      address: "203.0.113.10",
      port: 80,
      protocol: "TCP",
      backends: [`${env.topology.pod("web-1").ipv4}:8080`, `${env.topology.pod("web-2").ipv4}:8080`].sort(),
    });
  });

  test("ClusterIP TCP is balanced by the programs: both endpoints, no conntrack entry for the Service address", async () => {
    assert.deepEqual([...(await names(tcp("203.0.113.10", 80), 30))].sort(), ["web-1", "web-2"]);
    const ct = await env.topology.node.exec(["conntrack", "-L", "-d", "203.0.113.10"], {
      allowFailure: true,
    });
    assert.equal(ct.stdout.trim(), "", "nft DNAT would have left a conntrack entry");
  });

  /** Which of WIDE's addresses answered each of `n` connections to `address`:80 (-1: none). */
  const wideIndices = async (address: string, n: number) =>
    (await fromClient(tcp(address, 80), n)).map((r) =>
      WIDE.indexOf(r.ok ? (r.reply?.server.address ?? "") : ""),
    );

  test("a list longer than a chunk of the backend map: connections reach endpoints of every chunk", async () => {
    const seen = await wideIndices("203.0.113.30", 64);
    assert.ok(
      seen.every((i) => i >= 0),
      `every connection answered by one of the list: ${seen}`,
    );
    // 64 picks all in one half of 16 would have odds of 2^-63.
    assert.ok(seen.some((i) => i < 8) && seen.some((i) => i >= 8), `both chunks: ${seen}`);
  });

  test("ClientIP affinity keeps an endpoint from the list's second chunk", async () => {
    // The first pick is random: after each pick in the first chunk, affinity (2 s) is let expire.
    // Thirty picks that all miss the second chunk have odds of 2^-30.
    let picked = -1;
    for (let round = 0; round < 30 && picked < 8; round++) {
      if (round > 0) await new Promise((r) => setTimeout(r, 2200));
      [picked] = (await wideIndices("203.0.113.31", 1)) as [number];
    }
    assert.ok(picked >= 8, `a pick in the second chunk: ${picked}`);
    const after = await probeFrom(
      env.topology.client.ns,
      Array.from({ length: 8 }, () => tcp("203.0.113.31", 80)),
      { concurrency: 1, cgroup: mounts.clients },
    );
    assert.deepEqual(
      after.map((r) => WIDE.indexOf(r.ok ? (r.reply?.server.address ?? "") : "")),
      Array(8).fill(picked),
    );
  });

  test("endpoints see the client's own address, and the client sees the Service address as its peer", async () => {
    const [r] = await fromClient(tcp("203.0.113.10", 80), 1);
    assert.ok(r?.ok, r && outcome(r));
    assert.equal(r.reply?.client.address.replace("::ffff:", ""), env.topology.client.ipv4);
    // getpeername, translated back by the getpeername4 program.
    assert.equal(r.peer, "203.0.113.10");
  });

  test("a Service without endpoints refuses at once (ECONNREFUSED)", async () => {
    const [r] = await fromClient(tcp("203.0.113.17", 80, 2000), 1);
    assert.equal(r && outcome(r), "refused");
    assert.ok(r && r.ms < 500, `took ${r?.ms} ms`);
  });

  test("UDP is balanced", async () => {
    const seen = await names({ proto: "udp", host: "203.0.113.18", port: 53, timeoutMs: 1000 }, 20);
    assert.deepEqual([...seen].sort(), ["web-1", "web-2"]);
  });

  for (const [family, address] of [
    ["IPv4", "203.0.113.18"],
    ["IPv6", "2001:db8:2::18"],
  ] as const) {
    test(`unconnected UDP (sendto) over ${family} is balanced, and the replies come from the Service address`, async () => {
      const results = await fromClient(
        { proto: "udp", host: address, port: 53, timeoutMs: 1000, unconnected: true },
        20,
      );
      assert.deepEqual([...new Set(results.map(outcome))].sort(), ["web-1", "web-2"]);
      for (const r of results) {
        // recvmsg, translated back by the recvmsg programs: the endpoint's address never shows.
        assert.ok(r.ok);
        assert.deepEqual([r.peer, r.peerPort], [address, 53]);
      }
    });
  }

  test("unconnected UDP to a Service without endpoints fails at once (ECONNREFUSED from sendto)", async () => {
    const [r] = await fromClient(
      { proto: "udp", host: "203.0.113.19", port: 53, timeoutMs: 2000, unconnected: true },
      1,
    );
    assert.equal(r && outcome(r), "refused");
    assert.ok(r && r.ms < 500, `took ${r?.ms} ms`);
  });

  test("localhost NodePort: the node's 127.0.0.1:<nodePort> is balanced; a pod's own loopback and ::1 are not", async () => {
    const fromNode = (req: ProbeRequest, n: number) =>
      probeFrom(
        env.topology.node,
        Array.from({ length: n }, () => req),
        { concurrency: 4, cgroup: mounts.clients },
      );
    const seen = new Set((await fromNode(tcp("127.0.0.1", 30080), 20)).map(outcome));
    assert.deepEqual([...seen].sort(), ["web-1", "web-2"]);
    // kube-proxy never serves NodePorts on ::1: nothing listens there on the node.
    const [v6] = await fromNode(tcp("::1", 30080, 2000), 1);
    assert.equal(v6 && outcome(v6), "refused");
    // A pod's 127.0.0.1 is its own: nothing listens on 30080 in the client pod.
    const [pod] = await fromClient(tcp("127.0.0.1", 30080, 2000), 1);
    assert.equal(pod && outcome(pod), "refused");
  });

  test("what the programs pass on meets the node's nft rules: iTP Local drop, LB source ranges", async () => {
    const fromNode = (req: ProbeRequest) => probeFrom(env.topology.node, [req], { cgroup: mounts.clients });
    // iTP Local without an endpoint on this node: dropped, as kube-proxy does (no answer).
    const [itp] = await fromNode(tcp("203.0.113.14", 80, 1000));
    assert.equal(itp && outcome(itp), "timeout");
    // The node's own address is inside the first LB's ranges: DNAT in the output hook.
    const [allowed] = await fromNode(tcp("203.0.113.200", 80, 2000));
    assert.equal(allowed && outcome(allowed), "web-1");
    const [denied] = await fromNode(tcp("203.0.113.201", 80, 1000));
    assert.equal(denied && outcome(denied), "timeout");
    // The test's cgroup is a sub-tree: kpng says what node processes outside it lose.
    assert.match(kpng?.stderr() ?? "", /--cgroup-root is not the host's cgroup root/);
  });

  test("IPv6 ClusterIP is balanced", async () => {
    assert.deepEqual([...(await names(tcp("2001:db8:2::10", 80), 30))].sort(), ["web-1", "web-2"]);
  });

  test("an endpoint change reaches the maps, and connections follow it", async () => {
    const only2 = { web: { endpoints: [{ ip: env.topology.pod("web-2").ipv4!, node: "node-1" }] } };
    writeCluster(file, services(only2));
    await eventually(
      async () => [...(await names(tcp("203.0.113.10", 80), 10))].join() === "web-2",
      "web-2 only",
    );
    writeCluster(file, services());
    await eventually(async () => (await names(tcp("203.0.113.10", 80), 20)).size === 2, "both again");
  });

  test("a closed TCP connection leaves no entry in kpng_rev; a UDP socket keeps its entry while open", async () => {
    /** The kpng_rev entries whose frontend is `address`:`port` (IPv4). */
    const entriesFor = (address: string, port: number) => {
      const reverse = new RawMap(
        createMapRef(objGet(mapPinPath(mounts.bpfRoot, "reverse")), { transfer: true }),
      );
      const frontend = Buffer.alloc(18);
      for (const [i, b] of address.split(".").entries()) frontend[i] = Number(b);
      frontend.writeUInt16BE(port, 16);
      let n = 0;
      for (const batch of reverse.getBatch(4096))
        for (const [, v] of batch) if (v.subarray(0, 18).equals(frontend)) n++;
      return n;
    };
    assert.equal((await names(tcp("203.0.113.10", 80), 20)).size, 2);
    assert.equal(entriesFor("203.0.113.10", 80), 0, "each connection's entry went with its socket");
    // Earlier cases' unconnected UDP probes left theirs (a close cannot name them): counted apart.
    const unconnected = entriesFor("203.0.113.18", 53);
    await iteratorPinned();
    const open = udpClient("203.0.113.18");
    try {
      await firstReply(open);
      assert.equal(entriesFor("203.0.113.18", 53), unconnected + 1, "the open socket's entry");
    } finally {
      await open.stop();
    }
    await eventually(
      async () => entriesFor("203.0.113.18", 53) === unconnected,
      "the closed socket's entry to go",
    );
  });

  test("removed pins and detached programs are noticed and put back", async () => {
    await env.topology.node.exec([
      "bpftool",
      "cgroup",
      "detach",
      mounts.clients,
      "connect4",
      "pinned",
      join(mounts.bpfRoot, "kpng/progs/kpng_connect4"),
    ]);
    rmSync(join(mounts.bpfRoot, "kpng", "maps"), { recursive: true, force: true });
    rmSync(join(mounts.bpfRoot, "kpng", "udp-destroy"), { recursive: true, force: true });
    const started = Date.now();
    const attached = async () => (await attachments()).some((a) => a.attach_type === "cgroup_inet4_connect");
    // Polled often and cheaply, so the time measured is the repair's, not the check's.
    await eventually(
      async () =>
        existsSync(join(mounts.bpfRoot, "kpng", "udp-destroy", "iter")) &&
        (await listed()).find((f) => f.address === "203.0.113.10")?.backends.length === 2 &&
        (await attached()),
      "the maps, programs and iterator to be back",
      20_000,
      50,
    );
    const repairedMs = Date.now() - started;
    console.log(`repaired in ${repairedMs} ms`);
    assert.ok(repairedMs <= 5000, `repaired in ${repairedMs} ms, not within 5 s`);
    await eventually(async () => {
      const seen = await names(tcp("203.0.113.10", 80), 10);
      const ct = await env.topology.node.exec(["conntrack", "-L", "-d", "203.0.113.10"], {
        allowFailure: true,
      });
      return seen.size === 2 && ct.stdout.trim() === "";
    }, "traffic balanced by the programs again, with no conntrack entry");
    assert.match(kpng?.stderr() ?? "", /BPF pins or attachments missing/);
    const metrics = await httpGet(env.topology.node, "http://127.0.0.1:10249/metrics");
    assert.match(metrics.body, /kpng_rules_repairs_total\{backend="ebpf",family="IPv4"\} [1-9]/);
    // The programs now read the new maps: a change after the repair reaches the traffic.
    writeCluster(
      file,
      services({ web: { endpoints: [{ ip: env.topology.pod("web-1").ipv4!, node: "node-1" }] } }),
    );
    await eventually(
      async () => [...(await names(tcp("203.0.113.10", 80), 10))].join() === "web-1",
      "web-1 only",
    );
    writeCluster(file, services());
  });

  for (const [who, family, address, name, ip] of [
    ["a node process", "IPv4", "203.0.113.18", "dns", (pod: string) => env.topology.pod(pod).ipv4!],
    ["a node process", "IPv6", "2001:db8:2::18", "dns6", (pod: string) => env.topology.pod(pod).ipv6!],
    ["a pod", "IPv4", "203.0.113.18", "dns", (pod: string) => env.topology.pod(pod).ipv4!],
  ] as const) {
    test(`${who}'s connected UDP socket (${family}) to an endpoint that leaves is destroyed; connected again, it reaches the other one`, async () => {
      await iteratorPinned();
      // The node's namespace (kpng's own) or the client pod's: the iterator is read in both.
      const ns = who === "a pod" ? env.topology.client.ns : env.topology.node;
      const client = udpClient(address, 53, ns);
      try {
        const events = () => udpEvents(client);
        const got = await firstReply(client);
        const other = got === "web-1" ? "web-2" : "web-1";
        // The socket keeps its endpoint while it serves: connect() translated the address once.
        await eventually(async () => events().filter((e) => e.reply === got).length >= 3, "three replies");
        const before = events().length;
        writeCluster(file, services({ [name]: { endpoints: [{ ip: ip(other), node: "node-1" }] } }));
        // Its endpoint left: the next send fails (the echo server of the gone endpoint still
        // runs, so without the destroy the socket would go on getting its replies).
        await eventually(
          async () =>
            events()
              .slice(before)
              .some((e) => e.error !== undefined),
          "the connected socket's send to fail",
          15_000,
        );
        const after = events().slice(before);
        const failedAt = after.findIndex((e) => e.error !== undefined);
        await eventually(
          async () =>
            events()
              .slice(before + failedAt)
              .some((e) => e.reply !== undefined),
          "a reply on the socket connected again",
        );
        const replies = events()
          .slice(before + failedAt)
          .filter((e) => e.reply !== undefined);
        assert.deepEqual(new Set(replies.map((e) => e.reply)), new Set([other]));
      } finally {
        await client.stop();
        writeCluster(file, services());
      }
      await bothEndpointsAgain(address);
    });
  }

  test("an entry left in the iterator's map by a run that did not finish cuts nothing later", async () => {
    await iteratorPinned();
    const events = udpEvents;
    const kept = udpClient("203.0.113.18");
    const leaving = udpClient("2001:db8:2::18");
    try {
      const keptAt = await firstReply(kept);
      const leftAt = await firstReply(leaving);
      // As a kpng stopped between filling the map and emptying it leaves it: the socket of the
      // first client, whose endpoint stays in its Service.
      const cookies = connectedThrough(
        new RawMap(createMapRef(objGet(mapPinPath(mounts.bpfRoot, "reverse")), { transfer: true })).getBatch(
          4096,
        ),
        [{ address: "203.0.113.18", port: 53, endpoint: { ip: env.topology.pod(keptAt).ipv4!, port: 5353 } }],
      );
      assert.ok(cookies.length > 0, "the first client's socket in kpng_rev");
      const gone = new RawMap(createMapRef(objGet(udpDestroyPins(mounts.bpfRoot).map), { transfer: true }));
      for (const cookie of cookies) gone.set(cookie, Buffer.from([1]));
      const keptBefore = events(kept).length;
      const leavingBefore = events(leaving).length;
      // The second client's endpoint leaves: a run, which must cut its socket and only that.
      const other = leftAt === "web-1" ? "web-2" : "web-1";
      writeCluster(
        file,
        services({ dns6: { endpoints: [{ ip: env.topology.pod(other).ipv6!, node: "node-1" }] } }),
      );
      await eventually(
        async () =>
          events(leaving)
            .slice(leavingBefore)
            .some((e) => e.error !== undefined),
        "the leaving endpoint's socket to be cut",
        15_000,
      );
      await new Promise((r) => setTimeout(r, 1000));
      const keptAfter = events(kept).slice(keptBefore);
      assert.deepEqual(
        keptAfter.filter((e) => e.error !== undefined),
        [],
        "the socket whose endpoint stays was cut",
      );
      assert.ok(keptAfter.some((e) => e.reply === keptAt));
    } finally {
      await kept.stop();
      await leaving.stop();
      writeCluster(file, services());
    }
  });

  test("only sockets connected through the Service the endpoint left are cut: not through another Service, not straight to the pod", async () => {
    await iteratorPinned();
    const events = udpEvents;
    const leaving = udpClient("203.0.113.18");
    const clients = [leaving];
    try {
      const got = await firstReply(leaving);
      const other = got === "web-1" ? "web-2" : "web-1";
      const pod = env.topology.pod(got).ipv4!;
      // The same endpoint through another Service (its only endpoint, so certainly this one),
      // and straight to the pod's address.
      writeCluster(file, services({ "dns-b": { endpoints: [{ ip: pod, node: "node-1" }] } }));
      await eventually(
        async () => (await listed()).find((f) => f.address === "203.0.113.16")?.backends.length === 1,
        "dns-b on one endpoint",
      );
      const viaOther = udpClient("203.0.113.16");
      const direct = udpClient(pod, 5353);
      clients.push(viaOther, direct);
      for (const c of [viaOther, direct]) assert.equal(await firstReply(c), got);
      const before = clients.map((c) => events(c).length);
      writeCluster(
        file,
        services({
          "dns-b": { endpoints: [{ ip: pod, node: "node-1" }] },
          dns: { endpoints: [{ ip: env.topology.pod(other).ipv4!, node: "node-1" }] },
        }),
      );
      await eventually(
        async () =>
          events(leaving)
            .slice(before[0])
            .some((e) => e.error !== undefined),
        "the socket connected through dns to be cut",
        15_000,
      );
      // Replies keep coming on the other two sockets, and none of them was cut.
      const after = [viaOther, direct].map((c) => events(c).length);
      await eventually(
        async () =>
          [viaOther, direct].every(
            (c, i) =>
              events(c)
                .slice(after[i])
                .filter((e) => e.reply === got).length >= 3,
          ),
        "more replies on the sockets that stay",
      );
      for (const [i, c] of [viaOther, direct].entries())
        assert.deepEqual(
          events(c)
            .slice(before[i + 1])
            .filter((e) => e.error !== undefined),
          [],
          i === 0 ? "the socket connected through dns-b was cut" : "the socket connected to the pod was cut",
        );
    } finally {
      for (const c of clients) await c.stop();
      writeCluster(file, services());
    }
    await bothEndpointsAgain("203.0.113.18");
  });

  test("a connected UDP socket to an endpoint that left while kpng was stopped is destroyed when kpng starts again", async () => {
    await iteratorPinned();
    const client = udpClient("203.0.113.18");
    const events = () => udpEvents(client);
    try {
      const got = await firstReply(client);
      const other = got === "web-1" ? "web-2" : "web-1";
      await eventually(async () => events().filter((e) => e.reply === got).length >= 3, "three replies");
      // The programs and maps stay when kpng stops; the endpoint leaves while nothing watches.
      await kpng?.stop();
      kpng = undefined;
      writeCluster(
        file,
        services({ dns: { endpoints: [{ ip: env.topology.pod(other).ipv4!, node: "node-1" }] } }),
      );
      const stopped = events().length;
      await eventually(
        async () =>
          events()
            .slice(stopped)
            .filter((e) => e.reply === got).length >= 2,
        "replies from the gone endpoint while kpng is stopped",
      );
      assert.deepEqual(
        events()
          .slice(stopped)
          .filter((e) => e.error !== undefined),
        [],
      );
      const before = events().length;
      kpng = startKpng();
      // The first sync adopts the maps of the run before: they are the state the endpoint left.
      await eventually(
        async () =>
          events()
            .slice(before)
            .some((e) => e.error !== undefined),
        "the connected socket's send to fail after the restart",
        30_000,
      );
      const failedAt =
        before +
        events()
          .slice(before)
          .findIndex((e) => e.error !== undefined);
      await eventually(
        async () =>
          events()
            .slice(failedAt)
            .some((e) => e.reply !== undefined),
        "a reply on the socket connected again",
      );
      const replies = events()
        .slice(failedAt)
        .filter((e) => e.reply !== undefined);
      assert.deepEqual(new Set(replies.map((e) => e.reply)), new Set([other]));
    } finally {
      await client.stop();
      writeCluster(file, services());
    }
    kpng ??= startKpng();
    await bothEndpointsAgain("203.0.113.18");
  });

  test("a start that creates the maps anew (another --bpf-map-services) and waits for its first state: the programs of the run before serve until the new maps are written", async () => {
    await kpng?.stop();
    kpng = undefined;
    const balancedByPrograms = async () => {
      await env.topology.node.exec(["conntrack", "-D", "-d", "203.0.113.10"], { allowFailure: true });
      const seen = await names(tcp("203.0.113.10", 80), 20);
      const ct = await env.topology.node.exec(["conntrack", "-L", "-d", "203.0.113.10"], {
        allowFailure: true,
      });
      // Passed on unchanged, the connections would still be answered, through the nft table.
      return [...seen].sort().join() === "web-1,web-2" && ct.stdout.trim() === "";
    };
    // A backend whose brain never answers: it loads its programs against new maps of another
    // size, then waits for a first state that does not come.
    const waiting = env.topology.node.spawn(
      [
        process.execPath,
        MAIN,
        "local",
        "--api",
        `unix://${join(dir, "no-brain.sock")}`,
        "to-ebpf",
        ...flags,
        "--bpf-map-services",
        "4096",
        "--node-name",
        "node-1",
        "--healthz-bind-address",
        "",
        "--metrics-bind-address",
        "",
      ],
      { name: "kpng-waiting", env: { KPNG_LOG_LEVEL: "debug" } },
    );
    try {
      await waiting.waitForLine(/the programs attach once the maps are written/, 30_000);
      assert.equal(pinnedMapLayout(mapPinPath(mounts.bpfRoot, "services"))?.maxEntries, 4096);
      assert.ok(await balancedByPrograms(), "the programs of the run before serve the maps they hold");
    } finally {
      await waiting.stop();
    }
    kpng = startKpng("--bpf-map-services", "4096");
    await kpng.waitForLine(/BPF programs attached to the written maps/, 30_000);
    await bothEndpointsAgain("203.0.113.10");
    assert.ok(await balancedByPrograms(), "the new programs serve the new maps");
  });

  test("kpng cleanup ebpf detaches and unpins everything, and nothing else", async () => {
    await kpng?.stop();
    kpng = undefined;
    const foreign = join(mounts.bpfRoot, "someone-else");
    await pinForeignMap(env.topology.node, foreign);
    await kpngCli(["cleanup", "ebpf", ...flags]);
    assert.equal(existsSync(join(mounts.bpfRoot, "kpng")), false);
    assert.equal(existsSync(foreign), true);
    assert.deepEqual(await attachments(), []);
    rmSync(foreign);
  });
});
