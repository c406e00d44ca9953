// Fault: an endpoint removed while kpng was down kept its UDP conntrack entries for ever: the
// first state after a start was only a baseline. Now the first sync reconciles the table (as
// kube-proxy ≥ 1.31 does): entries DNATed to what is no longer an endpoint of their Service go,
// the rest stay. Real network namespace, real conntrack table, real kpng.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { writeCluster } from "../e2e/contract/cluster.ts";
import { eventually } from "../support/eventually.ts";
import { netnsSkipReason, type Spawned, suiteTopology } from "../support/netns.ts";

const MAIN = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();

/** A UDP flow of client 192.0.2.2 to the DNS Service, DNATed to `endpoint`. */
function flow(endpoint: string, sport: number): string[] {
  return [
    "conntrack",
    "-I",
    "-p",
    "udp",
    "-s",
    "192.0.2.2",
    "-d",
    "198.51.100.53",
    "--sport",
    String(sport),
    "--dport",
    "53",
    "-r",
    endpoint,
    "-q",
    "192.0.2.2",
    "--reply-port-src",
    "5353",
    "--reply-port-dst",
    String(sport),
    "-t",
    "300",
    "-u",
    "SEEN_REPLY",
  ];
}

describe("fault: stale UDP conntrack entries survive a restart", { skip }, () => {
  const env = suiteTopology({});
  const dir = mkdtempSync(join(tmpdir(), "kpng-conntrack-restart-"));
  const file = join(dir, "cluster.yaml");
  let kpng: Spawned | undefined;

  after(async () => {
    await kpng?.stop();
    if (process.env.KPNG_E2E_LOGS) console.log(kpng?.stderr());
    rmSync(dir, { recursive: true, force: true });
  });

  test("the first sync deletes the entries of the endpoint removed while kpng was down, and keeps the others", async () => {
    const node = env.topology.node;
    // While kpng was down, 203.0.113.30 left the Service; 203.0.113.20 is still an endpoint.
    await node.exec(flow("203.0.113.20", 40001));
    await node.exec(flow("203.0.113.30", 40002));
    const entries = async () => (await node.exec(["conntrack", "-L", "-p", "udp"])).stdout;
    assert.match(await entries(), /src=203\.0\.113\.30/);
    writeCluster(file, [
      {
        name: "dns",
        clusterIP: "198.51.100.53",
        ports: [{ name: "dns", port: 53, targetPort: 5353, protocol: "UDP" }],
        endpoints: [{ ip: "203.0.113.20", node: "node-1" }],
      },
    ]);
    kpng = node.spawn(
      [
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
      ],
      { name: "kpng" },
    );
    await eventually(
      async () => !/src=203\.0\.113\.30/.test(await entries()),
      "the stale entry to go",
      20_000,
    );
    assert.match(await entries(), /src=203\.0\.113\.20/, "the live flow was deleted");
  });
});
