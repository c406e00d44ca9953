// The Service IP ranges end to end: with a range, a packet to an address in it that no service
// holds is dropped on the node (it never reaches the pod that owns that address beyond the
// node), an unknown port of an allocated cluster IP is rejected, and the service answers; with
// the range gone, the same address is routed as ordinary traffic again. IPv4 and IPv6.
//
// The endpoints live outside the range (in 203.0.113.0/24 and 2001:db8:2::/112): a pod address
// inside a Service range would be dropped too, as in a real cluster.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { outcome, type ProbeRequest, type ProbeResult, probeFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import {
  netnsSkipReason,
  type Pod,
  type Spawned,
  suiteTopology,
  type Topology,
} from "../../support/netns.ts";
import { BACKENDS, type BackendSetup } from "./backends.ts";
import { kpngArgv, serviceCIDR, type TestService, writeCluster } from "./cluster.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();
const echo = { tcpPorts: [8080] };
const http = [{ name: "http", port: 80, targetPort: 8080 }];

const families = [
  { name: "IPv4", range: "198.51.100.0/24", service: "198.51.100.10", unallocated: "198.51.100.99" },
  { name: "IPv6", range: "2001:db8:1::/112", service: "2001:db8:1::10", unallocated: "2001:db8:1::99" },
] as const;

/** A counter, in the pod's own namespace, of the TCP packets for port 8080 that reach it. */
const COUNTER_RULES = `
table inet probe {
  chain in {
    type filter hook prerouting priority 0; policy accept;
    tcp dport 8080 counter
  }
}
`;

async function packetsSeen(pod: Pod): Promise<number> {
  const out = await pod.ns.exec(["nft", "list", "table", "inet", "probe"]);
  const m = /counter packets (\d+)/.exec(out.stdout);
  if (m === null) throw new Error(`no counter in ${out.stdout}`);
  return Number(m[1]);
}

// to-ebpf: the client pod joins the balanced cgroup. Its connections to the Services are balanced
// at connect(); those the programs pass on (an unallocated address, an unknown port) meet the nft
// companion's drop and reject, as with to-nft.
for (const backend of BACKENDS)
  describe(`Service IP ranges end to end (${backend.name})`, { skip }, () => {
    const env = suiteTopology({
      pods: [
        { name: "web", addresses: ["203.0.113.20", "2001:db8:2::20"], echo },
        // Beyond the node: the owner of the unallocated addresses, reached only when nothing drops.
        { name: "beyond", addresses: ["198.51.100.99", "2001:db8:1::99"], echo },
      ],
    });
    const dir = mkdtempSync(join(tmpdir(), "kpng-service-cidrs-e2e-"));
    const file = join(dir, "cluster.yaml");
    let kpng: Spawned | undefined;
    let setup: BackendSetup | undefined;
    let topo: Topology;

    const services = (): TestService[] => [
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
    const withRanges = () =>
      writeCluster(file, services(), {
        others: [
          serviceCIDR(
            "kubernetes",
            families.map((f) => f.range),
          ),
        ],
      });
    const withoutRanges = () => writeCluster(file, services());

    async function one(req: ProbeRequest, cgroup = setup?.clientCgroup): Promise<ProbeResult> {
      const [r] = await probeFrom(topo.client.ns, [req], { cgroup });
      return r!;
    }

    before(async () => {
      topo = env.topology;
      await topo.pod("beyond").ns.exec(["nft", "-f", "-"], { stdin: COUNTER_RULES });
      withRanges();
      setup = await backend.setup?.();
      kpng = topo.node.spawn(kpngArgv(MAIN, file, [...backend.sink, ...(setup?.flags ?? [])]), {
        name: "kpng",
        env: { KPNG_LOG_LEVEL: "debug" },
      });
      for (const f of families) {
        await eventually(async () => (await one(tcp(f.service, 80))).ok, `the ${f.name} service to answer`);
        // to-ebpf starts its nft companion (the drops) after the maps: answered outside the cgroup too.
        if (setup?.clientCgroup !== undefined)
          await eventually(
            async () => (await one(tcp(f.service, 80), undefined)).ok,
            `the ${f.name} service to answer through the nft rules`,
          );
      }
    });

    after(async () => {
      await kpng?.stop();
      if (process.env.KPNG_E2E_LOGS) console.log(kpng?.stderr());
      if (setup !== undefined) {
        await topo.node.exec([process.execPath, MAIN, "cleanup", backend.cleanup, ...setup.flags], {
          allowFailure: true,
        });
        await setup.teardown();
      }
      rmSync(dir, { recursive: true, force: true });
    });

    for (const f of families) {
      test(`${f.name}: an unallocated address in the range is dropped on the node`, async () => {
        const seen = await packetsSeen(topo.pod("beyond"));
        const r = await one(tcp(f.unallocated, 8080, 1500));
        assert.equal(outcome(r), "timeout");
        assert.equal(await packetsSeen(topo.pod("beyond")), seen, "a packet left the node");
      });

      test(`${f.name}: an unknown port of the allocated cluster IP is rejected; the service port answers`, async () => {
        // Refused, not a timeout: the reject comes before the range's drop. (In the ip6 table the
        // first SYN's ICMPv6 error is sometimes lost and the retransmission a second later is the
        // one refused, so the probe waits longer than the SYN retransmission.)
        const r = await one(tcp(f.service, 81, 3000));
        assert.equal(outcome(r), "refused");
        assert.equal(outcome(await one(tcp(f.service, 80))), "web");
      });
    }

    test("with the range removed, the unallocated addresses are routed normally again; restored, dropped again", async () => {
      withoutRanges();
      for (const f of families) {
        await eventually(
          async () => outcome(await one(tcp(f.unallocated, 8080))) === "beyond",
          `${f.unallocated} to be routed`,
        );
        assert.equal(outcome(await one(tcp(f.service, 80))), "web");
      }
      withRanges();
      for (const f of families) {
        await eventually(
          async () => outcome(await one(tcp(f.unallocated, 8080, 500))) === "timeout",
          `${f.unallocated} to be dropped again`,
        );
        assert.equal(outcome(await one(tcp(f.service, 80))), "web");
      }
    });
  });
