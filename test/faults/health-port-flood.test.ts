// Fault: anyone who reached the health port crashed kpng. Under the usual open-file limit (1024),
// 1,100 idle connections to /healthz left no descriptor for the next `spawn nft` (EMFILE), and
// the unhandled spawn error ended the process. Now the server holds at most a fixed number of
// connections (one more is answered 503 and closed) and drops idle ones; kpng stays alive and
// keeps programming Services. Real network namespace, real nft, real TCP.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { type TestService, writeCluster } from "../e2e/contract/cluster.ts";
import { outcome, probeFrom, tcp } from "../support/client.ts";
import { eventually } from "../support/eventually.ts";
import { netnsSkipReason, type Spawned, suiteTopology, type Topology } from "../support/netns.ts";

const MAIN = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();
const echo = { tcpPorts: [8080] };
const http = [{ name: "http", port: 80, targetPort: 8080 }];
const CONNECTIONS = 1100;

/** Opens `n` connections to the health port and holds them, reopening any the server closes. */
const FLOODER = `
import { connect } from "node:net";
const n = Number(process.argv[2]);
let opened = 0;
function one() {
  const s = connect({ host: "127.0.0.1", port: 10256 });
  s.on("connect", () => { opened++; if (opened === n) console.log("opened"); });
  s.on("error", () => {});
  s.on("close", () => setTimeout(one, 100));
}
for (let i = 0; i < n; i++) one();
`;

const web = (name: string, ip: string): TestService => ({
  name,
  clusterIP: ip,
  ports: http,
  endpoints: [{ ip: "203.0.113.20", node: "node-1" }],
});

describe("fault: 1,100 idle connections to the health port under `ulimit -n 1024`", { skip }, () => {
  const env = suiteTopology({ pods: [{ name: "web", addresses: ["203.0.113.20"], echo }] });
  const dir = mkdtempSync(join(tmpdir(), "kpng-health-flood-"));
  const file = join(dir, "cluster.yaml");
  const flooderFile = join(dir, "flooder.mjs");
  let kpng: Spawned | undefined;
  let flooder: Spawned | undefined;
  let topo: Topology;

  const answers = async (ip: string) => {
    const [r] = await probeFrom(topo.client.ns, [tcp(ip, 80)]);
    return outcome(r!) === "web";
  };

  before(async () => {
    topo = env.topology;
    writeFileSync(flooderFile, FLOODER);
    writeCluster(file, [web("one", "198.51.100.10")]);
    kpng = topo.node.spawn(
      [
        "bash",
        "-c",
        'ulimit -n 1024 && exec "$@"',
        "kpng",
        process.execPath,
        MAIN,
        "file",
        "--input",
        file,
        "to-local",
        "to-nft",
        "--node-name",
        "node-1",
        "--nodeport-addresses",
        "192.0.2.1/32",
        "--min-sync-period",
        "100ms",
      ],
      { name: "kpng" },
    );
    await eventually(() => answers("198.51.100.10"), "the first service");
  });

  after(async () => {
    await flooder?.stop();
    await kpng?.stop();
    if (process.env.KPNG_E2E_LOGS) console.log(kpng?.stderr());
    rmSync(dir, { recursive: true, force: true });
  });

  test("kpng stays alive and keeps syncing", async () => {
    flooder = topo.node.spawn([process.execPath, flooderFile, String(CONNECTIONS)], { name: "flooder" });
    // Long enough for several periodic rules probes, each a new `nft` process.
    await new Promise((r) => setTimeout(r, 5000));
    assert.ok(kpng?.running(), `kpng exited; stderr: ${kpng?.stderr()}`);
    writeCluster(file, [web("one", "198.51.100.10"), web("two", "198.51.100.11")]);
    await eventually(() => answers("198.51.100.11"), "the new service", 20_000);
    assert.ok(kpng?.running(), `kpng exited; stderr: ${kpng?.stderr()}`);
    assert.match(kpng?.stderr() ?? "", /"msg":"open-file limit"/);
  });
});
