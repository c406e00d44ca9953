// `kpng explain --rules`: against the live kernel of a node namespace where one kpng process runs
// the nft backend (unlabelled Services) and the iptables backend (service-proxy-name=legacy).
// In line, explain lists the Service's kernel objects and finds no drift; after another program
// removes one of them, explain names it and exits 1.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { probeFrom, tcp } from "../../support/client.ts";
import { eventually } from "../../support/eventually.ts";
import { netnsSkipReason, type Spawned, suiteTopology, type Topology } from "../../support/netns.ts";
import { writeCluster } from "../contract/cluster.ts";
import { SINK_FLAGS, spawnTwoBackends } from "../contract/two-backends.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await netnsSkipReason();
/** The backends' flags that shape their rules: explain renders with the same. */
const SHAPE = SINK_FLAGS.slice(2, 6);

describe("kpng explain --rules against the kernel", { skip }, () => {
  const env = suiteTopology({
    pods: [
      { name: "web-1", echo: { tcpPorts: [8080] } },
      { name: "web-2", echo: { tcpPorts: [8080] } },
    ],
  });
  const dir = mkdtempSync(join(tmpdir(), "kpng-explain-rules-"));
  const file = join(dir, "cluster.yaml");
  let kpng: Spawned | undefined;
  let topo: Topology;

  const explain = async (target: string, backend: string) => {
    const args = ["explain", target, "--input", file, "--node-name", "node-1", "--rules", backend, ...SHAPE];
    if (backend === "iptables") args.push("--iptables-mode", "nft", "--service-proxy-name", "legacy");
    const r = await topo.node.exec([process.execPath, MAIN, ...args], {
      allowFailure: true,
      timeoutMs: 60_000,
    });
    return { code: r.code, out: r.stdout, err: r.stderr };
  };

  before(async () => {
    topo = env.topology;
    const ip = (pod: string) => topo.pod(pod).ipv4 ?? "";
    const http = [{ name: "http", port: 80, targetPort: 8080 }];
    const endpoints = [
      { ip: ip("web-1"), node: "node-1" },
      { ip: ip("web-2"), node: "node-2" },
    ];
    writeCluster(file, [
      { name: "web", clusterIP: "203.0.113.10", ports: http, endpoints },
      {
        name: "np",
        type: "NodePort",
        clusterIP: "203.0.113.12",
        ports: [{ ...http[0]!, nodePort: 30082 }],
        endpoints,
      },
      { name: "empty", clusterIP: "203.0.113.13", ports: http, endpoints: [] },
      {
        name: "old",
        type: "NodePort",
        clusterIP: "203.0.113.11",
        ports: [{ ...http[0]!, nodePort: 30080 }],
        endpoints,
        proxyName: "legacy",
      },
    ]);
    kpng = spawnTwoBackends(topo.node, file, ["--healthz-bind-address", "", "--metrics-bind-address", ""]);
    await eventually(
      async () => {
        const [a, b] = await probeFrom(topo.client.ns, [tcp("203.0.113.10", 80), tcp("203.0.113.11", 80)]);
        return a?.ok === true && b?.ok === true;
      },
      "both backends to program their Services",
      30_000,
    );
  });

  after(async () => {
    await kpng?.stop();
    await topo.node.exec(["nft", "delete", "table", "ip", "kpng"]).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  test("nft: the Service's elements are read from the kernel and match the brain", async () => {
    for (const target of ["default/web", "default/np", "default/empty"]) {
      const r = await explain(target, "nft");
      assert.equal(r.code, 0, `${target}\n${r.out}\n${r.err}`);
      assert.match(r.out, /kernel objects \(nft\)/);
      assert.match(r.out, /drift: none/);
    }
    const web = await explain("default/web", "nft");
    // The endpoints as the kernel holds them, in the endpoints map.
    assert.ok(web.out.includes(`${topo.pod("web-1").ipv4} . 8080`), web.out);
    assert.ok(web.out.includes(`${topo.pod("web-2").ipv4} . 8080`), web.out);
    const empty = await explain("default/empty", "nft");
    assert.match(empty.out, /no-endpoint-services/);
  });

  test("nft: an element removed behind kpng's back is reported as drift", async () => {
    const listed = (await topo.node.exec(["nft", "-j", "list", "map", "ip", "kpng", "service-ips"])).stdout;
    assert.match(listed, /203\.0\.113\.10/);
    await topo.node.exec([
      "nft",
      "delete",
      "element",
      "ip",
      "kpng",
      "service-ips",
      "{ 203.0.113.10 . tcp . 80 }",
    ]);
    const r = await explain("default/web", "nft");
    assert.equal(r.code, 1);
    assert.match(r.out, /DRIFT ip kpng service-ips 203\.0\.113\.10 \. tcp \. 80/);
    assert.match(r.err, /the kernel differs from the brain for default\/web/);
  });

  test("iptables: the Service's chains and dispatch rules match the brain", async () => {
    const r = await explain("default/old", "iptables");
    assert.equal(r.code, 0, `${r.out}\n${r.err}`);
    assert.match(r.out, /kernel objects \(iptables\)/);
    assert.match(r.out, /iptables chain nat KPNG-SVC-/);
    assert.match(r.out, /drift: none/);
  });

  test("iptables: a dispatch rule removed behind kpng's back is reported as drift", async () => {
    const listed = (
      await topo.node.exec(["iptables-nft", "-t", "nat", "-n", "-L", "KPNG-SERVICES", "--line-numbers"])
    ).stdout;
    const number = listed
      .split("\n")
      .find((l) => l.includes("203.0.113.11"))
      ?.split(/\s+/)[0];
    assert.ok(number, listed);
    await topo.node.exec(["iptables-nft", "-t", "nat", "-D", "KPNG-SERVICES", number]);
    const r = await explain("default/old", "iptables");
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /DRIFT iptables nat dispatch rules/);
  });
});
