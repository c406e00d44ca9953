// A ServiceCIDR of 0.0.0.0/0 and ::/0 (one typo in one cluster-scoped object) went straight into
// the range set that new connections are dropped against: the node lost every connection it
// opened to a non-Service address. A range covering the node's own link (its addresses and its
// gateway) did the same to the node's neighbours. Both are refused now; the valid range still
// drops its unallocated addresses. Real network namespaces, real nft, real TCP, both backends.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { BACKENDS } from "../e2e/contract/backends.ts";
import { serviceCIDR, type TestService, writeCluster } from "../e2e/contract/cluster.ts";
import { outcome, type ProbeRequest, type ProbeResult, probeFrom, tcp } from "../support/client.ts";
import { eventually } from "../support/eventually.ts";
import { netnsSkipReason, type Spawned, suiteTopology, type Topology } from "../support/netns.ts";

const MAIN = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();
const echo = { tcpPorts: [8080] };
const http = [{ name: "http", port: 80, targetPort: 8080 }];

// to-ebpf leaves Service ranges to its nft companion (covered by the nft row); its node-local
// clients need the contract suite's cgroup setup.
for (const backend of BACKENDS.filter((b) => b.name !== "iptables-legacy" && b.name !== "ebpf"))
  describe(`a ServiceCIDR covering everything or the node's link (${backend.name})`, { skip }, () => {
    const env = suiteTopology({
      pods: [
        { name: "web", addresses: ["203.0.113.20", "2001:db8:2::20"], echo },
        { name: "beyond", addresses: ["198.51.100.99", "2001:db8:1::99"], echo },
      ],
    });
    const dir = mkdtempSync(join(tmpdir(), "kpng-service-cidr-egress-"));
    const file = join(dir, "cluster.yaml");
    let kpng: Spawned | undefined;
    let topo: Topology;

    const services: TestService[] = [
      {
        name: "web",
        clusterIP: "198.51.100.10",
        ports: http,
        endpoints: [{ ip: "203.0.113.20", node: "node-1" }],
      },
      {
        name: "web6",
        clusterIP: "2001:db8:1::10",
        ports: http,
        endpoints: [{ ip: "2001:db8:2::20", node: "node-1" }],
      },
    ];

    async function fromNode(req: ProbeRequest): Promise<ProbeResult> {
      const [r] = await probeFrom(topo.node, [req]);
      return r!;
    }

    before(async () => {
      topo = env.topology;
      writeCluster(file, services, {
        others: [
          serviceCIDR("everything", ["0.0.0.0/0"]),
          serviceCIDR("everything6", ["::/0"]),
          // The node's link: the node is 192.0.2.1 and 2001:db8::1, its gateway .2 and ::2.
          serviceCIDR("node-link", ["192.0.2.0/24", "2001:db8::/64"]),
          serviceCIDR("kubernetes", ["198.51.100.0/24", "2001:db8:1::/112"]),
        ],
      });
      kpng = topo.node.spawn(
        [
          process.execPath,
          MAIN,
          "file",
          "--input",
          file,
          "to-local",
          ...backend.sink,
          "--node-name",
          "node-1",
          "--nodeport-addresses",
          "192.0.2.1/32,2001:db8::1/128",
          "--min-sync-period",
          "100ms",
        ],
        { name: "kpng" },
      );
      // Programmed: the services answer a client beyond the node.
      for (const ip of ["198.51.100.10", "2001:db8:1::10"]) {
        await eventually(async () => {
          const [r] = await probeFrom(topo.client.ns, [tcp(ip, 80)]);
          return outcome(r!) === "web";
        }, `the service at ${ip}`);
      }
    });

    after(async () => {
      await kpng?.stop();
      if (process.env.KPNG_E2E_LOGS) console.log(kpng?.stderr());
      rmSync(dir, { recursive: true, force: true });
    });

    test("the node still reaches addresses outside the valid range", async () => {
      assert.equal(outcome(await fromNode(tcp("203.0.113.20", 8080))), "web");
      assert.equal(outcome(await fromNode(tcp("2001:db8:2::20", 8080))), "web");
    });

    test("the valid range still drops its unallocated addresses", async () => {
      assert.equal(outcome(await fromNode(tcp("198.51.100.99", 8080, 1500))), "timeout");
      assert.equal(outcome(await fromNode(tcp("2001:db8:1::99", 8080, 1500))), "timeout");
    });

    test("each refused range is logged as a warning", () => {
      const text = kpng?.stderr() ?? "";
      for (const range of ["0.0.0.0/0", "::/0", "192.0.2.0/24", "2001:db8::/64"])
        assert.match(text, new RegExp(`"level":40[^\\n]*${range.replace(/[./]/g, "\\$&")}`), range);
    });
  });
