// The node services end to end, with the nft and the eBPF backends: the real CLI runs in a node
// namespace, pods answer real UDP/TCP traffic, and the health, metrics and healthCheckNodePort
// servers are asked over HTTP from the node and from the external client. With to-ebpf the client
// pod joins the balanced cgroup (a pod of this node); the external client stays outside it.

import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { outcome, type ProbeRequest, probeFrom } from "../../support/client.ts";
import { eventually as waitFor } from "../../support/eventually.ts";
import {
  ebpfSkipReason,
  netnsSkipReason,
  type Spawned,
  suiteTopology,
  type Topology,
} from "../../support/netns.ts";
import { BACKENDS, type BackendSetup, type BackendUnderTest } from "../contract/backends.ts";
import { kpngArgv, type TestService, writeCluster } from "../contract/cluster.ts";
import { httpGet } from "./http-get.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
/** The backends the suite runs on, with why one cannot run here. */
const SKIP: Record<string, string | false> = {
  nft: await netnsSkipReason(),
  ebpf: await ebpfSkipReason(),
};
const echo = { tcpPorts: [8080], udpPorts: [5353] };
const http = [{ name: "http", port: 80, targetPort: 8080 }];
const dnsPort = [{ name: "dns", protocol: "UDP" as const, port: 53, targetPort: 5353 }];

function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  return waitFor(check, what, timeoutMs, 100);
}

const tcp = (host: string, port: number): ProbeRequest => ({ proto: "tcp", host, port, timeoutMs: 1000 });
/** One fixed client port: every datagram belongs to the same conntrack entry. */
const udpFixed = (host: string): ProbeRequest => ({
  proto: "udp",
  host,
  port: 53,
  timeoutMs: 500,
  localPort: 40053,
});

function nodeServices(backend: BackendUnderTest): void {
  describe(`node services end to end (${backend.name})`, {
    skip: SKIP[backend.name] ?? false,
  }, () => {
    const env = suiteTopology({
      pods: [
        { name: "web-1", echo },
        { name: "web-2", echo },
      ],
    });
    const dir = mkdtempSync(join(tmpdir(), "kpng-node-e2e-"));
    const file = join(dir, "cluster.yaml");
    let kpng: Spawned | undefined;
    let setup: BackendSetup | undefined;
    let topo: Topology;
    let extra: TestService[] = [];
    /** to-ebpf balances the pod's sockets: each new socket picks an endpoint (no conntrack entry). */
    const socketBalanced = () => setup?.clientCgroup !== undefined;
    /** From the client pod, inside the balanced cgroup (to-ebpf). */
    const fromPod = (requests: ProbeRequest[]) =>
      probeFrom(topo.client.ns, requests, { cgroup: setup?.clientCgroup });

    const on = (pod: string, node = "node-1") => ({ ip: topo.pod(pod).ipv4!, node });

    function services(over: Record<string, Partial<TestService>> = {}): TestService[] {
      const base: TestService[] = [
        {
          name: "web",
          clusterIP: "203.0.113.10",
          ports: http,
          endpoints: [on("web-1"), on("web-2", "node-2")],
        },
        {
          name: "dns",
          clusterIP: "203.0.113.18",
          ports: dnsPort,
          endpoints: [on("web-1"), on("web-2", "node-2")],
        },
        { name: "late", clusterIP: "203.0.113.19", ports: dnsPort, endpoints: [] },
        {
          name: "lb",
          type: "LoadBalancer",
          clusterIP: "203.0.113.12",
          ports: [{ ...http[0]!, nodePort: 30081 }],
          loadBalancerIP: "203.0.113.200",
          externalTrafficPolicy: "Local",
          healthCheckNodePort: 32000,
          endpoints: [on("web-1"), on("web-2", "node-2")],
        },
      ];
      return [...base.map((s) => ({ ...s, ...(over[s.name] ?? {}) })), ...extra];
    }

    const argv = (args: readonly string[] = []) =>
      kpngArgv(
        MAIN,
        file,
        [...backend.sink, ...(setup?.flags ?? [])],
        ["--cluster-cidr", "198.51.100.0/24,2001:db8:1::/64", ...args],
      );
    const startKpng = () => topo.node.spawn(argv(), { name: "kpng", env: { KPNG_LOG_LEVEL: "debug" } });

    const fromNode = (path: string) => httpGet(topo.node, `http://127.0.0.1${path}`);
    const hc = (port: number) => httpGet(topo.external, `http://192.0.2.1:${port}/healthz`);

    async function udpAnswers(host: string, n: number): Promise<string[]> {
      // One process, one request after the other: the same source port cannot be bound twice at once.
      const requests = Array.from({ length: n }, () => udpFixed(host));
      const results = await probeFrom(topo.client.ns, requests, {
        cgroup: setup?.clientCgroup,
        concurrency: 1,
      });
      return results.map(outcome);
    }

    before(async () => {
      topo = env.topology;
      writeCluster(file, services());
      setup = await backend.setup?.();
      kpng = startKpng();
      await eventually(
        async () => (await fromPod([tcp("203.0.113.10", 80)]))[0]!.ok,
        "the first sync",
        60_000,
      );
    });

    after(async () => {
      await kpng?.stop();
      if (process.env.KPNG_E2E_LOGS) console.log(kpng?.stderr());
      // The node's namespace (and its nft tables) is gone; the pins and the cgroup go with the mounts.
      await setup?.teardown();
      rmSync(dir, { recursive: true, force: true });
    });

    test("/healthz and /livez answer 200 with kube-proxy's JSON body", async () => {
      await eventually(async () => (await fromNode(":10256/healthz")).status === 200, "/healthz 200");
      const h = await fromNode(":10256/healthz");
      assert.equal(h.headers["content-type"], "application/json");
      assert.equal(h.headers["x-content-type-options"], "nosniff");
      const body = JSON.parse(h.body);
      assert.deepEqual(Object.keys(body), [
        "lastUpdated",
        "currentTime",
        "nodeEligible",
        "healthy",
        "status",
      ]);
      assert.equal(body.nodeEligible, true);
      assert.equal(body.status.IPv4.healthy, true);
      const l = await fromNode(":10256/livez");
      assert.equal(l.status, 200);
      assert.equal("nodeEligible" in JSON.parse(l.body), false);
    });

    test("a node tainted for deletion: /healthz 503 (nodeEligible false), /livez and healthCheckNodePort stay 200", async () => {
      writeCluster(file, services(), { node1ToBeDeleted: true });
      await eventually(async () => (await fromNode(":10256/healthz")).status === 503, "/healthz 503");
      assert.equal(JSON.parse((await fromNode(":10256/healthz")).body).nodeEligible, false);
      assert.equal((await fromNode(":10256/livez")).status, 200);
      assert.equal((await hc(32000)).status, 200);
      writeCluster(file, services());
      await eventually(async () => (await fromNode(":10256/healthz")).status === 200, "/healthz 200 again");
    });

    test(`/metrics has kube-proxy's names; /proxyMode says ${backend.mode}`, async () => {
      const m = await fromNode(":10249/metrics");
      assert.equal(m.status, 200);
      for (const name of [
        "kubeproxy_sync_proxy_rules_duration_seconds_bucket",
        "kubeproxy_sync_full_proxy_rules_duration_seconds_count",
        "kubeproxy_sync_partial_proxy_rules_duration_seconds_count",
        "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
        "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
        "kubeproxy_network_programming_duration_seconds_bucket",
        "kubeproxy_sync_proxy_rules_endpoint_changes_total",
        "kubeproxy_sync_proxy_rules_service_changes_total",
        "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
        "kubeproxy_proxy_healthz_total",
        "kpng_family_programmed",
      ]) {
        assert.match(m.body, new RegExp(`^${name}`, "m"), name);
      }
      // One metric family for every backend, told apart by a label.
      assert.match(
        m.body,
        new RegExp(
          `^kubeproxy_sync_proxy_rules_duration_seconds_count\\{backend="${backend.mode}",ip_family="IPv4"\\} `,
          "m",
        ),
      );
      assert.equal((await fromNode(":10249/proxyMode")).body, backend.mode);
      // Metrics stay on the loopback by default.
      assert.ok((await httpGet(topo.external, "http://192.0.2.1:10249/metrics")).error);
    });

    test("healthCheckNodePort: 200 with the local count, 503 with only remote endpoints, gone with the service", async () => {
      const ok = await hc(32000);
      assert.equal(ok.status, 200);
      assert.equal(ok.headers["x-load-balancing-endpoint-weight"], "1");
      assert.deepEqual(JSON.parse(ok.body), {
        service: { namespace: "default", name: "lb" },
        localEndpoints: 1,
        serviceProxyHealthy: true,
      });
      writeCluster(file, services({ lb: { endpoints: [on("web-2", "node-2")] } }));
      await eventually(async () => (await hc(32000)).status === 503, "503 without local endpoints");
      assert.equal(JSON.parse((await hc(32000)).body).localEndpoints, 0);
      writeCluster(
        file,
        services().filter((s) => s.name !== "lb"),
      );
      await eventually(
        async () => (await hc(32000)).error !== undefined,
        "the server to close with the service",
      );
      writeCluster(file, services());
    });

    test("UDP from a fixed source port moves off an endpoint that left the service, within 2 s", async () => {
      const first = await udpAnswers("203.0.113.18", 3);
      // Balanced in the socket (to-ebpf), each probe's new socket picks again: no entry pins the
      // flow, and afterwards only the map says where it goes.
      if (!socketBalanced())
        assert.equal(new Set(first).size, 1, `one conntrack entry, one endpoint: ${first}`);
      const gone = first[0]!;
      const stays = gone === "web-1" ? "web-2" : "web-1";
      // The pod that leaves keeps answering: only conntrack cleanup (or the map) can move the flow.
      writeCluster(
        file,
        services({ dns: { endpoints: [on(stays, stays === "web-1" ? "node-1" : "node-2")] } }),
      );
      const changed = Date.now();
      // Thirty answers: balanced in the socket (to-ebpf), each picks at random until the map has
      // changed, and ten all from `stays` by chance (one poll in 1,024) passed this check early.
      await eventually(
        async () => (await udpAnswers("203.0.113.18", 30)).every((a) => a === stays),
        "the flow to move",
        2000,
      );
      assert.ok(Date.now() - changed <= 2000);
      assert.deepEqual(new Set(await udpAnswers("203.0.113.18", 10)), new Set([stays]));
    });

    test("UDP to a service that had no endpoints reaches the one it gains, within 2 s", async () => {
      // The entry a client leaves while a service has no endpoints: no NAT, to the service IP.
      await topo.node.exec([
        "conntrack",
        "-I",
        "-p",
        "udp",
        "-s",
        "198.51.100.200",
        "-d",
        "203.0.113.19",
        "--sport",
        "40053",
        "--dport",
        "53",
        "-r",
        "203.0.113.19",
        "-q",
        "198.51.100.200",
        "--reply-port-src",
        "53",
        "--reply-port-dst",
        "40053",
        "-t",
        "120",
      ]);
      const listed = await topo.node.exec(["conntrack", "-L", "-p", "udp", "--orig-dst", "203.0.113.19"]);
      assert.match(listed.stdout, /sport=40053/, "the stale entry is in the table");
      writeCluster(file, services({ late: { endpoints: [on("web-1")] } }));
      const changed = Date.now();
      await eventually(
        async () => (await udpAnswers("203.0.113.19", 1))[0] === "web-1",
        "the flow to reach web-1",
        2000,
      );
      assert.ok(Date.now() - changed <= 2000);
    });

    // to-ebpf: its nft rules are repaired in test/e2e/contract/repair.test.ts, its pins and
    // programs in test/e2e/ebpf/ebpf.test.ts.
    test("nft flush ruleset in the node is repaired within 5 s", {
      skip: backend.name === "nft" ? false : "repaired in the repair and eBPF suites",
    }, async () => {
      await topo.node.exec(["nft", "flush", "ruleset"]);
      const flushed = Date.now();
      await eventually(
        async () => (await fromPod([tcp("203.0.113.10", 80)]))[0]!.ok,
        "traffic to flow again",
        5000,
      );
      assert.ok(Date.now() - flushed <= 5000);
      await eventually(
        async () =>
          /^kpng_rules_repairs_total\{backend="nftables",family="ip"\} 1$/m.test(
            (await fromNode(":10249/metrics")).body,
          ),
        "the repair metric",
      );
      assert.match(kpng!.stderr(), /deleted or flushed by another program/);
    });

    test("a healthCheckNodePort taken by another process is skipped; the others serve", async () => {
      const squatter = topo.node.spawn(
        [
          process.execPath,
          "-e",
          "require('net').createServer().listen(32001, '192.0.2.1', () => console.log('listening'))",
        ],
        { name: "squatter" },
      );
      await squatter.waitForLine(/listening/);
      try {
        const lb = services()[3]!;
        extra = [
          {
            ...lb,
            name: "taken",
            clusterIP: "203.0.113.30",
            healthCheckNodePort: 32001,
            ports: [{ ...http[0]!, nodePort: 30090 }],
          },
          {
            ...lb,
            name: "free",
            clusterIP: "203.0.113.31",
            healthCheckNodePort: 32002,
            ports: [{ ...http[0]!, nodePort: 30091 }],
          },
        ];
        writeCluster(file, services());
        await eventually(async () => (await hc(32002)).status === 200, "the free port to serve");
        assert.match(kpng!.stderr(), /cannot serve healthCheckNodePort/);
        assert.match(
          (await fromNode(":10249/metrics")).body,
          /kpng_healthcheck_nodeport_bind_failures_total [1-9]/,
        );
        assert.equal((await fromPod([tcp("203.0.113.10", 80)]))[0]!.ok, true);
      } finally {
        await squatter.stop();
        extra = [];
        writeCluster(file, services());
      }
    });

    test("1,000 eTP Local services open and close their servers without leaking sockets", async () => {
      const fds = () => readdirSync(`/proc/${kpng!.pid}/fd`).length;
      await eventually(async () => (await hc(32001)).error !== undefined, "the extra services to go");
      const before = fds();
      const lb = services()[3]!;
      // One cluster IP, a port each: enough for distinct services without leaving the test range.
      extra = Array.from({ length: 1000 }, (_, i) => ({
        ...lb,
        name: `many-${i}`,
        clusterIP: "203.0.113.250",
        healthCheckNodePort: 31200 + i,
        ports: [{ ...http[0]!, port: 1000 + i, nodePort: 30100 + i }],
      }));
      writeCluster(file, services());
      await eventually(
        async () => (await hc(32199)).status === 200 && (await hc(31200)).status === 200,
        "1,000 servers",
        60_000,
      );
      const during = fds();
      assert.ok(during >= before + 1000, `a socket per server: ${before} → ${during}`);
      extra = [];
      writeCluster(file, services());
      await eventually(async () => (await hc(32199)).error !== undefined, "the servers to close", 60_000);
      await eventually(async () => fds() <= before + 2, `file descriptors back to ${before}`, 10_000);
    });

    test("SIGTERM closes the servers, leaves the rules, and exits 0", async () => {
      const exit = await kpng!.stop(5000);
      assert.deepEqual(exit, { code: 0, signal: null });
      assert.ok((await fromNode(":10256/healthz")).error);
      assert.ok((await fromPod([tcp("203.0.113.10", 80)]))[0]!.ok, "rules (and programs) stay in place");
    });

    test("an unparsable bind address exits 2 before anything starts", async () => {
      const r = await topo.node.exec(argv(["--healthz-bind-address", "nope"]), {
        allowFailure: true,
        timeoutMs: 20_000,
      });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /--healthz-bind-address/);
    });
  });
}

for (const backend of BACKENDS) if (backend.name in SKIP) nodeServices(backend);
