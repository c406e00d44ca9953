// `kpng explain --rules ebpf`: against the live kernel of a node namespace where kpng runs to-ebpf
// (maps pinned under the test's own bpffs mount). In line, explain lists the Service's map entries
// and its nft rules and finds no drift; after another program deletes a frontend from the pinned
// map, explain names it and exits 1.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { encodeFrontend } from "../../../src/backends/ebpf/layout.ts";
import { mapPinPath } from "../../../src/backends/ebpf/maps.ts";
import { eventually } from "../../support/eventually.ts";
import {
  type BpfMounts,
  ebpfSkipReason,
  mountBpf,
  type Spawned,
  suiteTopology,
} from "../../support/netns.ts";
import { writeCluster } from "../contract/cluster.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
const skip = await ebpfSkipReason();
/** The flags that shape the rules: the backend and explain get the same. */
const SHAPE = ["--nodeport-addresses", "192.0.2.1/32", "--cluster-cidr", "198.51.100.0/24"];
const http = [{ name: "http", port: 80, targetPort: 8080 }];

describe("kpng explain --rules ebpf against the kernel", { skip }, () => {
  const env = suiteTopology({
    pods: [
      { name: "web-1", echo: { tcpPorts: [8080] } },
      { name: "web-2", echo: { tcpPorts: [8080] } },
    ],
  });
  const dir = mkdtempSync(join(tmpdir(), "kpng-explain-ebpf-"));
  const file = join(dir, "cluster.yaml");
  let mounts: BpfMounts;
  let kpng: Spawned | undefined;

  const kpngCli = async (args: string[]) => {
    const r = await env.topology.node.exec([process.execPath, MAIN, ...args], {
      allowFailure: true,
      timeoutMs: 60_000,
    });
    return { code: r.code, out: r.stdout, err: r.stderr };
  };
  const explain = (target: string) =>
    kpngCli([
      "explain",
      target,
      "--input",
      file,
      "--node-name",
      "node-1",
      "--rules",
      "ebpf",
      "--bpf-root",
      mounts.bpfRoot,
      ...SHAPE,
    ]);

  before(async () => {
    mounts = await mountBpf();
    const topo = env.topology;
    const on = (pod: string) => ({ ip: topo.pod(pod).ipv4!, node: "node-1" });
    writeCluster(file, [
      { name: "web", clusterIP: "203.0.113.10", ports: http, endpoints: [on("web-1"), on("web-2")] },
      {
        name: "np",
        type: "NodePort",
        clusterIP: "203.0.113.12",
        ports: [{ ...http[0]!, nodePort: 30082 }],
        endpoints: [on("web-1"), on("web-2")],
      },
      { name: "empty", clusterIP: "203.0.113.13", ports: http, endpoints: [] },
    ]);
    kpng = topo.node.spawn(
      [
        process.execPath,
        MAIN,
        "file",
        "--input",
        file,
        "to-local",
        "to-ebpf",
        "--bpf-root",
        mounts.bpfRoot,
        "--cgroup-root",
        mounts.clients,
        "--node-name",
        "node-1",
        ...SHAPE,
        "--min-sync-period",
        "100ms",
        "--healthz-bind-address",
        "",
        "--metrics-bind-address",
        "",
      ],
      { name: "kpng" },
    );
    await eventually(
      async () => {
        const r = await kpngCli(["ebpf", "list", "-o", "json", "--bpf-root", mounts.bpfRoot]);
        return r.code === 0 && (JSON.parse(r.out) as unknown[]).length >= 4;
      },
      "kpng to program the maps",
      30_000,
    );
  });

  after(async () => {
    await kpng?.stop();
    await kpngCli(["cleanup", "ebpf", "--bpf-root", mounts.bpfRoot, "--cgroup-root", mounts.clients]);
    await mounts?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the Service's map entries and nft rules are read from the kernel and match the brain", async () => {
    for (const target of ["default/web", "default/np", "default/empty"]) {
      const r = await explain(target);
      assert.equal(r.code, 0, `${target}\n${r.out}\n${r.err}`);
      assert.match(r.out, /kernel objects \(ebpf\)/);
      assert.match(r.out, /drift: none/);
    }
    const web = await explain("default/web");
    assert.match(web.out, /kpng_svc 203\.0\.113\.10:80\/TCP/);
    assert.ok(web.out.includes(`${env.topology.pod("web-1").ipv4}:8080`), web.out);
    assert.ok(web.out.includes(`${env.topology.pod("web-2").ipv4}:8080`), web.out);
    assert.match(web.out, /nft element/);
    const np = await explain("default/np");
    assert.match(np.out, /kpng_svc 192\.0\.2\.1:30082\/TCP/);
    const empty = await explain("default/empty");
    assert.match(empty.out, /kpng_svc 203\.0\.113\.13:80\/TCP\n\s+\(reject\)\n/);
  });

  test("a frontend deleted from the pinned map behind kpng's back is reported as drift", async () => {
    const key = [...encodeFrontend({ ip: "203.0.113.10", port: 80, protocol: "TCP" })].map((b) =>
      b.toString(16).padStart(2, "0"),
    );
    await promisify(execFile)(
      "bpftool",
      ["map", "delete", "pinned", mapPinPath(mounts.bpfRoot, "services"), "key", "hex", ...key],
      { timeout: 10_000 },
    );
    const r = await explain("default/web");
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /DRIFT bpf 203\.0\.113\.10:80\/TCP/);
    assert.match(r.err, /the kernel differs from the brain for default\/web/);
  });
});
