// Rules emptied by another program come back within the probe interval, with real traffic: a
// flushed dispatch chain and a flushed table (nft), a flushed KPNG-SERVICES chain and a flushed
// nat table (iptables). The probe reads the chains' contents, not their names: every case here
// keeps the chains declared, so a probe of declarations alone never notices.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { outcome, probeFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import { netnsSkipReason, type Spawned, suiteTopology, type Topology } from "../../support/netns.ts";
import { BACKENDS, type BackendSetup } from "./backends.ts";
import { kpngArgv, writeCluster } from "./cluster.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();
const echo = { tcpPorts: [8080] };
const http = [{ name: "http", port: 80, targetPort: 8080 }];
const V4 = "198.51.100.10";
const V6 = "2001:db8:1::10";

/** How often each backend checks its rules (nft: 1 s; iptables: --canary-interval, 2 s). */
const PROBE_MS: Record<string, number> = {
  nft: 1000,
  "iptables-nft": 2000,
  "iptables-legacy": 2000,
  ebpf: 1000,
};
/** A repair is a full sync: allowed on top of the probe interval (a loaded two-core machine). */
const SYNC_MARGIN_MS = 3000;

/** The ways another program empties kpng's rules, per backend: name → argv run in the node. */
function tamperings(backend: string): [string, string[], string][] {
  // to-ebpf's traffic from outside the balanced cgroup (this client) is its nft companion's; its
  // own pins and programs are repaired in test/e2e/ebpf/ebpf.test.ts.
  if (backend === "nft" || backend === "ebpf")
    return [
      ["nft flush chain ip kpng services", ["nft", "flush", "chain", "ip", "kpng", "services"], V4],
      ["nft flush table ip kpng", ["nft", "flush", "table", "ip", "kpng"], V4],
      ["nft flush table ip6 kpng", ["nft", "flush", "table", "ip6", "kpng"], V6],
    ];
  const variant = backend.replace("iptables-", "");
  return [
    ["iptables -t nat -F KPNG-SERVICES", [`iptables-${variant}`, "-t", "nat", "-F", "KPNG-SERVICES"], V4],
    ["iptables -t nat -F", [`iptables-${variant}`, "-t", "nat", "-F"], V4],
    ["ip6tables -t nat -F KPNG-SERVICES", [`ip6tables-${variant}`, "-t", "nat", "-F", "KPNG-SERVICES"], V6],
  ];
}

for (const backend of BACKENDS)
  describe(`repair of emptied rules (${backend.name})`, { skip }, () => {
    const env = suiteTopology({
      pods: [{ name: "web", addresses: ["203.0.113.20", "2001:db8:2::20"], echo }],
    });
    const dir = mkdtempSync(join(tmpdir(), "kpng-repair-e2e-"));
    const file = join(dir, "cluster.yaml");
    let kpng: Spawned | undefined;
    let setup: BackendSetup | undefined;
    let topo: Topology;
    const answers = async (ip: string) =>
      outcome((await probeFrom(topo.client.ns, [tcp(ip, 80, 500)]))[0]!) === "web";
    const repairsLogged = () => (kpng?.stderr().match(/deleted or flushed by another program/g) ?? []).length;

    before(async () => {
      topo = env.topology;
      writeCluster(file, [
        { name: "web", clusterIP: V4, ports: http, endpoints: [{ ip: "203.0.113.20", node: "node-1" }] },
        { name: "web6", clusterIP: V6, ports: http, endpoints: [{ ip: "2001:db8:2::20", node: "node-1" }] },
      ]);
      setup = await backend.setup?.();
      kpng = topo.node.spawn(kpngArgv(MAIN, file, [...backend.sink, ...(setup?.flags ?? [])]), {
        name: "kpng",
      });
      for (const ip of [V4, V6]) await eventually(() => answers(ip), `${ip} to answer`);
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

    for (const [what, argv, ip] of tamperings(backend.name))
      test(`${what}: traffic flows again within the probe interval, the repair is logged`, async () => {
        const logged = repairsLogged();
        const r = await topo.node.exec(argv);
        assert.equal(r.code, 0, r.stderr);
        const tampered = Date.now();
        const limit = (PROBE_MS[backend.name] ?? 2000) + SYNC_MARGIN_MS;
        await eventually(
          async () => repairsLogged() > logged && (await answers(ip)),
          "the repair",
          limit,
          50,
        );
        assert.ok(Date.now() - tampered <= limit + 500, `repaired after ${Date.now() - tampered} ms`);
        for (const other of [V4, V6]) assert.ok(await answers(other), `${other} answers`);
      });
  });
