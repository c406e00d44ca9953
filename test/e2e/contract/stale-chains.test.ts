// A foreign rule that jumps to one of kpng's chains must not stop kpng: with iptables, the chain
// of a removed Service stays while another program's chain jumps to it (`CHAIN_DEL … busy`);
// every other change is still applied, in both families, and the chain goes once it is freed.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { outcome, probeFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import { netnsSkipReason, type Spawned, suiteTopology, type Topology } from "../../support/netns.ts";
import { BACKENDS } from "./backends.ts";
import { kpngArgv, type TestService, writeCluster } from "./cluster.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();
const echo = { tcpPorts: [8080] };
const http = [{ name: "http", port: 80, targetPort: 8080 }];

const svc = (name: string, clusterIP: string, ip: string): TestService => ({
  name,
  clusterIP,
  ports: http,
  endpoints: [{ ip, node: "node-1" }],
});
const OLD = svc("old", "198.51.100.11", "203.0.113.20");
const WEB = svc("web", "198.51.100.10", "203.0.113.20");
const WEB6 = svc("web6", "2001:db8:1::10", "2001:db8:2::20");
const NEW = svc("new", "198.51.100.12", "203.0.113.20");
const NEW6 = svc("new6", "2001:db8:1::12", "2001:db8:2::20");

for (const backend of BACKENDS.filter((b) => b.name.startsWith("iptables-")))
  describe(`a foreign jump to a stale chain (${backend.name})`, { skip }, () => {
    const env = suiteTopology({
      pods: [{ name: "web", addresses: ["203.0.113.20", "2001:db8:2::20"], echo }],
    });
    const dir = mkdtempSync(join(tmpdir(), "kpng-stale-e2e-"));
    const file = join(dir, "cluster.yaml");
    const iptables = `iptables-${backend.name.replace("iptables-", "")}`;
    let kpng: Spawned | undefined;
    let topo: Topology;
    const answers = async (ip: string) =>
      outcome((await probeFrom(topo.client.ns, [tcp(ip, 80, 500)]))[0]!) === "web";
    const natChains = async () => (await topo.node.exec([`${iptables}-save`, "-t", "nat"])).stdout;

    before(async () => {
      topo = env.topology;
      writeCluster(file, [WEB, OLD, WEB6]);
      kpng = topo.node.spawn(kpngArgv(MAIN, file, backend.sink), { name: "kpng" });
      for (const ip of [WEB.clusterIP, OLD.clusterIP, WEB6.clusterIP])
        await eventually(() => answers(ip), `${ip} to answer`);
    });

    after(async () => {
      await kpng?.stop();
      if (process.env.KPNG_E2E_LOGS) console.log(kpng?.stderr());
      rmSync(dir, { recursive: true, force: true });
    });

    test("the removed Service's chain stays while used; both families follow every change; it goes once freed", async () => {
      const saved = await natChains();
      const stale = new RegExp(`^-A KPNG-SERVICES -d ${OLD.clusterIP}/32 .* -j (KPNG-SVC-\\S+)$`, "m").exec(
        saved,
      )?.[1];
      assert.ok(stale, `the chain of ${OLD.name} in\n${saved}`);
      for (const args of [
        ["-N", "SOMEONE-ELSE"],
        ["-A", "SOMEONE-ELSE", "-j", stale],
      ])
        assert.equal((await topo.node.exec([iptables, "-t", "nat", ...args])).code, 0);

      writeCluster(file, [WEB, NEW, WEB6, NEW6]);
      for (const ip of [NEW.clusterIP, NEW6.clusterIP])
        await eventually(() => answers(ip), `${ip} to answer`);
      await eventually(
        async () => /cannot delete unused kpng chains/.test(kpng?.stderr() ?? ""),
        "the warning",
      );
      assert.doesNotMatch(kpng?.stderr() ?? "", /sync failed/);
      assert.match(await natChains(), new RegExp(`^:${stale} `, "m"), "left in place while used");

      await topo.node.exec([iptables, "-t", "nat", "-F", "SOMEONE-ELSE"]);
      writeCluster(file, [WEB, WEB6, NEW6]);
      await eventually(async () => !(await answers(NEW.clusterIP)), `${NEW.clusterIP} to be gone`);
      await eventually(
        async () => !new RegExp(`^:${stale} `, "m").test(await natChains()),
        "the stale chain to go",
      );
    });
  });
