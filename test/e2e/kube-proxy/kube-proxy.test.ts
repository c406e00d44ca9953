// `kpng kube-proxy` end to end, as kubeadm's DaemonSet would run it: kubeadm's config.conf (as
// written, mode "" = iptables, and with mode nftables) with a kubeconfig pointing at the test API
// server, `--hostname-override`, and a node that still holds kube-proxy's nftables table and whose
// InternalIP is on another interface than its default route. Real
// traffic from a pod, an external client and (iptables mode) the node itself on 127.0.0.1. An
// edit of the file ends the process, so that the pod restarts with it.

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { outcome, type ProbeRequest, probeFrom } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import { netnsSkipReason, type Spawned, suiteTopology, type Topology } from "../../support/netns.ts";
import { loadNft } from "./rulesets.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const API_SERVER = fileURLToPath(new URL("../../apiserver/server.ts", import.meta.url));
const KUBEADM_CONFIG = fileURLToPath(
  new URL("../../unit/kube-proxy-compat/fixtures/kubeadm-config.conf", import.meta.url),
);
const API_PORT = 16443;
const API_URL = `http://127.0.0.1:${API_PORT}`;
const skip = await netnsSkipReason();
const echo = { tcpPorts: [8080] };

const KUBE_PROXY_LEFTOVER = `table ip kube-proxy {
  chain nat-prerouting { type nat hook prerouting priority dstnat; policy accept; tcp dport 80 drop; }
}
`;

/**
 * The node's InternalIP, on a second interface: the default route is on ext0 (192.0.2.1), as on a
 * node with one interface for the Internet and one for the cluster. The external client reaches
 * it on its link (the node answers ARP for every local address).
 */
const INTERNAL_IP = "192.0.2.77";

const tcp = (host: string, port: number): ProbeRequest => ({ proto: "tcp", host, port, timeoutMs: 1000 });

// kubeadm's exact file says mode "" (iptables); the nftables run sets the mode.
for (const mode of ["nftables", "iptables"] as const)
  describe(`kpng kube-proxy with kubeadm's configuration (${mode} mode)`, { skip }, () => {
    const env = suiteTopology({
      pods: [
        { name: "web-1", echo },
        { name: "web-2", echo },
      ],
    });
    const dir = mkdtempSync(join(tmpdir(), "kpng-kube-proxy-e2e-"));
    let topo: Topology;
    let api: Spawned | undefined;
    let kpng: Spawned | undefined;

    /** Writes an object to the API server in the node's namespace, as kubectl would. */
    async function write(method: "POST" | "PUT", path: string, object: object): Promise<void> {
      await topo.node.exec(
        [
          "curl",
          "-sSf",
          "-X",
          method,
          "-H",
          "Content-Type: application/json",
          "--data-binary",
          "@-",
          `${API_URL}${path}`,
        ],
        { stdin: JSON.stringify(object), timeoutMs: 5000 },
      );
    }

    function slice(ips: readonly string[]): object {
      return {
        apiVersion: "discovery.k8s.io/v1",
        kind: "EndpointSlice",
        metadata: { name: "web-1", namespace: "default", labels: { "kubernetes.io/service-name": "web" } },
        addressType: "IPv4",
        ports: [{ name: "http", protocol: "TCP", port: 8080 }],
        endpoints: ips.map((ip) => ({
          addresses: [ip],
          nodeName: "node-1",
          conditions: { ready: true, serving: true, terminating: false },
        })),
      };
    }

    async function answers(
      from: "client" | "external" | "node",
      req: ProbeRequest,
      n: number,
    ): Promise<string[]> {
      const ns = from === "client" ? topo.client.ns : from === "node" ? topo.node : topo.external;
      const results = await probeFrom(
        ns,
        Array.from({ length: n }, () => req),
        { concurrency: 4 },
      );
      return [...new Set(results.map(outcome))].sort();
    }

    before(async () => {
      topo = env.topology;
      await loadNft(topo.node, KUBE_PROXY_LEFTOVER);
      for (const argv of [
        ["ip", "link", "add", "int0", "type", "veth", "peer", "name", "int0p"],
        ["ip", "address", "add", `${INTERNAL_IP}/32`, "dev", "int0"],
        ["ip", "link", "set", "int0", "up"],
        ["ip", "link", "set", "int0p", "up"],
      ])
        await topo.node.exec(argv);
      api = topo.node.spawn(
        [process.execPath, API_SERVER, "--port", String(API_PORT), "--bookmark-interval-ms", "1000"],
        {
          name: "apiserver",
        },
      );
      await eventually(async () => api!.stdout().includes("listening"), "the test API server", 20_000);
      await write("POST", "/api/v1/nodes", {
        apiVersion: "v1",
        kind: "Node",
        metadata: { name: "node-1", labels: {} },
        status: { addresses: [{ type: "InternalIP", address: INTERNAL_IP }] },
      });
      await write("POST", "/api/v1/namespaces/default/services", {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "web", namespace: "default" },
        spec: {
          type: "NodePort",
          clusterIP: "203.0.113.10",
          clusterIPs: ["203.0.113.10"],
          ipFamilies: ["IPv4"],
          externalTrafficPolicy: "Cluster",
          ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080, nodePort: 30080 }],
        },
      });
      await write(
        "POST",
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        slice([topo.pod("web-1").ipv4!, topo.pod("web-2").ipv4!]),
      );

      // kubeadm's ConfigMap, as mounted at /var/lib/kube-proxy: config.conf and kubeconfig.conf.
      const kubeconfig = join(dir, "kubeconfig.conf");
      writeFileSync(join(dir, "token"), "kube-proxy-token");
      writeFileSync(
        kubeconfig,
        stringify({
          apiVersion: "v1",
          kind: "Config",
          clusters: [{ name: "default", cluster: { server: API_URL } }],
          // As kubeadm writes it: the service account token, by file.
          users: [{ name: "default", user: { tokenFile: join(dir, "token") } }],
          contexts: [{ name: "default", context: { cluster: "default", user: "default" } }],
          "current-context": "default",
        }),
      );
      const config = readFileSync(KUBEADM_CONFIG, "utf8")
        .replace(/^mode: ""$/m, mode === "nftables" ? "mode: nftables" : 'mode: ""')
        .replace("/var/lib/kube-proxy/kubeconfig.conf", kubeconfig)
        .replace("clusterCIDR: 10.244.0.0/16", "clusterCIDR: 198.51.100.0/24")
        // nodePortAddresses unset, as kubeadm writes it: nftables mode serves NodePorts on the
        // Node object's InternalIP, iptables mode on every local address (127.0.0.1 included).
        .concat("minSyncPeriod: 100ms\n");
      writeFileSync(join(dir, "config.conf"), config);

      kpng = topo.node.spawn(
        [
          process.execPath,
          MAIN,
          "kube-proxy",
          `--config=${join(dir, "config.conf")}`,
          // Kept with --config, as kube-proxy keeps it.
          "--hostname-override=Node-1",
          // Ignored with --config, as kube-proxy ignores it (a warning names it).
          "--masquerade-all",
        ],
        { name: "kpng", env: { KPNG_LOG_LEVEL: "info" } },
      );
      await eventually(
        async () => (await answers("client", tcp("203.0.113.10", 80), 1)).join() !== "timeout",
        "kpng to program the first state",
        45_000,
      );
    });

    after(async () => {
      await kpng?.stop();
      if (process.env.KPNG_E2E_LOGS) console.log(kpng?.stderr());
      await api?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    test("kube-proxy's leftover nftables table was removed before kpng programmed its own", async () => {
      const tables = (await topo.node.exec(["nft", "list", "tables"])).stdout;
      assert.doesNotMatch(tables, /kube-proxy/);
      if (mode === "nftables") assert.match(tables, /table ip kpng/);
      else assert.match((await topo.node.exec(["iptables-save", "-t", "nat"])).stdout, /^:KPNG-SERVICES/m);
      assert.match(kpng!.stderr(), /running as kube-proxy/);
      assert.match(kpng!.stderr(), /"flags":\["--masquerade-all"\].*flags ignored because --config is given/);
    });

    test("ClusterIP traffic from a pod reaches both endpoints", async () => {
      assert.deepEqual(await answers("client", tcp("203.0.113.10", 80), 30), ["web-1", "web-2"]);
    });

    test("the NodePort answers an external client on the Node object's InternalIP", async () => {
      assert.deepEqual(await answers("external", tcp(INTERNAL_IP, 30080), 30), ["web-1", "web-2"]);
    });

    test(`the default-route interface's address: ${mode === "nftables" ? "no NodePort (not the InternalIP)" : "a NodePort too (every local address)"}`, async () => {
      // Enough requests that random balancing misses an endpoint with odds of 2^-29.
      const got = await answers("external", tcp(topo.nodeIPv4, 30080), mode === "nftables" ? 4 : 30);
      if (mode === "nftables") assert.ok(!got.some((r) => r.startsWith("web")), got.join());
      else assert.deepEqual(got, ["web-1", "web-2"]);
    });

    test(`localhost NodePorts: ${mode === "iptables" ? "127.0.0.1 answers (kube-proxy's iptables default)" : "none in nftables mode"}`, async () => {
      const local = await answers("node", tcp("127.0.0.1", 30080), mode === "iptables" ? 30 : 4);
      if (mode === "iptables") {
        assert.deepEqual(local, ["web-1", "web-2"]);
        assert.equal(
          (await topo.node.exec(["sysctl", "-n", "net.ipv4.conf.all.route_localnet"])).stdout.trim(),
          "1",
        );
      } else assert.notDeepEqual(local, ["web-1", "web-2"]);
    });

    test("an EndpointSlice change in the API server is followed", async () => {
      await write(
        "PUT",
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-1",
        slice([topo.pod("web-2").ipv4!]),
      );
      await eventually(
        async () => (await answers("client", tcp("203.0.113.10", 80), 10)).join() === "web-2",
        "traffic to go to web-2 only",
        20_000,
      );
    });

    test("an edit of the config file ends kpng with an error, as kube-proxy (the pod restarts)", async () => {
      const file = join(dir, "config.conf");
      writeFileSync(file, readFileSync(file, "utf8").replace("verbosity: 0", "verbosity: 2"));
      const exit = await Promise.race([
        kpng!.exited,
        new Promise<undefined>((r) => setTimeout(() => r(undefined), 20_000)),
      ]);
      assert.equal(exit?.code, 1, kpng!.stderr().slice(-2000));
      assert.match(kpng!.stderr(), /configuration file changed/);
    });
  });
