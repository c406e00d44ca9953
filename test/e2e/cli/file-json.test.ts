// The real CLI on the example cluster: `kpng file … to-local to-json` printing the documented
// local state of each node (docs/local-state.md), as a user would run it.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import type {
  LocalServiceJson,
  LocalServicePortJson,
  LocalStateJson,
} from "../../../src/sinks/json/local-state-json.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "../../..");
const example = join(root, "examples/cluster.yaml");
const cli = join(root, "src/cli/main.ts");

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function kpng(args: string[], timeoutMs = 20_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`kpng ${args.join(" ")} did not exit within ${timeoutMs}ms; stderr: ${stderr}`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

async function localState(node: string, ...extra: string[]): Promise<LocalStateJson> {
  const run = await kpng([
    "file",
    "--input",
    example,
    "to-local",
    "to-json",
    "--node-name",
    node,
    "--once",
    ...extra,
  ]);
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(run.stdout);
}

function serviceOf(state: LocalStateJson, key: string): LocalServiceJson {
  const found = state.services.find((s) => `${s.namespace}/${s.name}` === key);
  assert.ok(found, `${key} is in the local state of ${state.node}`);
  return found;
}

function portOf(state: LocalStateJson, key: string, portName = ""): LocalServicePortJson {
  const port = serviceOf(state, key).ports.find((p) => p.name === portName) ?? serviceOf(state, key).ports[0];
  assert.ok(port);
  return port;
}

describe("kpng file … to-local to-json on examples/cluster.yaml", () => {
  const states = new Map<string, LocalStateJson>();
  before(async () => {
    for (const node of ["node-1", "node-2", "node-3"]) states.set(node, await localState(node));
  });
  const state = (node: string) => states.get(node)!;

  test("each node gets a document naming it, services sorted; headless, ExternalName and other proxies' services are absent", () => {
    for (const node of ["node-1", "node-2", "node-3"]) {
      const s = state(node);
      assert.equal(s.node, node);
      assert.ok(s.revision >= 1);
      assert.deepEqual(
        s.services.map((x) => `${x.namespace}/${x.name}`),
        [
          "default/api",
          "default/dual",
          "default/frontend",
          "default/ingress-local",
          "default/metrics-agent",
          "default/status",
          "default/web",
          "shop/catalog",
          "shop/checkout",
          "shop/session",
        ],
      );
    }
  });

  test("ClusterIP: every node sends ClusterIP traffic to all ready pods, and has no external endpoints", () => {
    for (const node of ["node-1", "node-2", "node-3"]) {
      const web = portOf(state(node), "default/web", "http");
      assert.deepEqual(web.internalEndpoints, [
        "198.51.100.2:8080",
        "198.51.100.18:8080",
        "198.51.100.34:8080",
      ]);
      assert.deepEqual(web.externalEndpoints, []);
      assert.equal(web.hasEndpoints, true);
    }
  });

  test("fallback: a Service whose fallback slice says active uses only its endpoints", () => {
    for (const node of ["node-1", "node-2", "node-3"]) {
      const status = portOf(state(node), "default/status", "http");
      assert.deepEqual(status.internalEndpoints, ["198.51.100.9:8000"]);
      assert.equal(status.hasEndpoints, true);
    }
  });

  test("NodePort with eTP Cluster: external endpoints are the cluster-wide ones, on each port", () => {
    const api = serviceOf(state("node-2"), "default/api");
    assert.deepEqual(api.externalIPs, ["203.0.113.100"]);
    assert.deepEqual(
      api.ports.map((p) => [p.name, p.nodePort, p.externalEndpoints]),
      [
        ["http", 30080, ["198.51.100.3:8080", "198.51.100.35:8080"]],
        ["grpc", 30090, ["198.51.100.3:9090", "198.51.100.35:9090"]],
      ],
    );
  });

  test("LoadBalancer: VIP ingress IPs only (not ipMode Proxy), source ranges as written", () => {
    const frontend = serviceOf(state("node-1"), "default/frontend");
    assert.deepEqual(frontend.loadBalancerIPs, ["203.0.113.200"]);
    assert.deepEqual(frontend.sourceRanges, ["192.0.2.0/24", "198.51.100.0/24"]);
    assert.equal(frontend.healthCheckNodePort, 0, "eTP Cluster has no health check port");
  });

  test("eTP Local LoadBalancer: only local pods for external traffic; none on a node without them", () => {
    const expected: Record<string, { external: string[]; localReady: number }> = {
      "node-1": { external: [], localReady: 0 },
      "node-2": { external: ["198.51.100.20:8080"], localReady: 1 },
      "node-3": { external: ["198.51.100.37:8080", "198.51.100.44:8080"], localReady: 2 },
    };
    for (const [node, want] of Object.entries(expected)) {
      const svc = serviceOf(state(node), "default/ingress-local");
      assert.equal(svc.healthCheckNodePort, 32081);
      assert.equal(svc.localReadyEndpoints, want.localReady, node);
      const port = svc.ports[0]!;
      assert.deepEqual(port.externalEndpoints, want.external, node);
      assert.deepEqual(port.internalEndpoints, [
        "198.51.100.20:8080",
        "198.51.100.37:8080",
        "198.51.100.44:8080",
      ]);
      assert.equal(port.hasEndpoints, true, "the service has endpoints somewhere: drop, not reject");
    }
  });

  test("iTP Local: ClusterIP traffic only to local pods; none on the node without the agent", () => {
    assert.deepEqual(portOf(state("node-1"), "default/metrics-agent").internalEndpoints, [
      "198.51.100.4:9100",
    ]);
    assert.deepEqual(portOf(state("node-2"), "default/metrics-agent").internalEndpoints, [
      "198.51.100.21:9100",
    ]);
    assert.deepEqual(portOf(state("node-3"), "default/metrics-agent").internalEndpoints, []);
  });

  test("ClientIP affinity gives its timeout; no affinity gives 0", () => {
    assert.equal(serviceOf(state("node-1"), "shop/session").sessionAffinitySeconds, 600);
    assert.equal(serviceOf(state("node-1"), "default/web").sessionAffinitySeconds, 0);
  });

  test("topology hints: a node uses the endpoints hinted for its zone", () => {
    const zoneA = ["198.51.100.6:8080", "198.51.100.22:8080"];
    assert.deepEqual(portOf(state("node-1"), "shop/catalog").internalEndpoints, zoneA);
    assert.deepEqual(portOf(state("node-2"), "shop/catalog").internalEndpoints, zoneA);
    assert.deepEqual(portOf(state("node-3"), "shop/catalog").internalEndpoints, ["198.51.100.38:8080"]);
  });

  test("terminating rollout: ready pods for ClusterIP; eTP Local falls back to a local serving, terminating pod", () => {
    for (const node of ["node-1", "node-2", "node-3"]) {
      assert.deepEqual(portOf(state(node), "shop/checkout").internalEndpoints, [
        "198.51.100.24:8080",
        "198.51.100.39:8080",
      ]);
    }
    assert.deepEqual(portOf(state("node-1"), "shop/checkout").externalEndpoints, ["198.51.100.7:8080"]);
    assert.deepEqual(portOf(state("node-2"), "shop/checkout").externalEndpoints, ["198.51.100.24:8080"]);
    assert.deepEqual(portOf(state("node-3"), "shop/checkout").externalEndpoints, ["198.51.100.39:8080"]);
    assert.equal(
      serviceOf(state("node-1"), "shop/checkout").localReadyEndpoints,
      0,
      "terminating pods do not count",
    );
  });

  test("dual stack: one cluster IP per family, endpoints of both families, IPv6 in brackets", () => {
    const dual = serviceOf(state("node-1"), "default/dual");
    assert.deepEqual(dual.clusterIPs, ["203.0.113.16", "2001:db8:2::16"]);
    const port = dual.ports[0]!;
    assert.deepEqual(port.endpointFamilies, ["IPv4", "IPv6"]);
    assert.deepEqual(port.internalEndpoints, [
      "198.51.100.8:8080",
      "198.51.100.40:8080",
      "[2001:db8:1::8]:8080",
      "[2001:db8:1::2:28]:8080",
    ]);
  });

  test("--service-proxy-name shows only the services labelled for that proxy", async () => {
    const other = await localState("node-3", "--service-proxy-name", "other-proxy");
    assert.deepEqual(
      other.services.map((s) => `${s.namespace}/${s.name}`),
      ["default/mesh-gateway"],
    );
    assert.deepEqual(other.services[0]?.ports[0]?.internalEndpoints, ["198.51.100.41:8080"]);
  });

  test("the global to-json prints the model the file holds, sorted", async () => {
    const run = await kpng(["file", "--input", example, "to-json", "--once"]);
    assert.equal(run.code, 0, run.stderr);
    const doc = JSON.parse(run.stdout);
    assert.deepEqual(
      doc.nodes.map((n: { metadata: { name: string } }) => n.metadata.name),
      ["node-1", "node-2", "node-3"],
    );
    const names = doc.services.map((s: { metadata: { name: string } }) => s.metadata.name);
    assert.ok(!names.includes("mesh-gateway"), "another proxy's service is not selected");
    assert.ok(names.includes("web"));
  });
});

describe("kpng command line mistakes", () => {
  const cases: { name: string; args: string[]; code: number; message: RegExp }[] = [
    {
      name: "an unknown option exits 2 and names it",
      args: ["file", "--input", example, "to-local", "to-json", "--no-such-flag"],
      code: 2,
      message: /unknown option '--no-such-flag'/,
    },
    {
      name: "a missing --input exits 2 and names it",
      args: ["file", "to-local", "to-json"],
      code: 2,
      message: /--input <path>' not specified/,
    },
    {
      name: "an invalid duration exits 2 and shows the accepted forms",
      args: ["file", "--input", example, "to-local", "to-json", "--min-sync-period", "fast"],
      code: 2,
      message: /"fast" is not a duration/,
    },
    {
      name: "an unknown sink exits 2 and lists the sinks",
      args: ["file", "--input", example, "to-local", "to-nowhere"],
      code: 2,
      message: /unknown command 'to-nowhere'.*choose one of: .*to-json/,
    },
    {
      name: "a to-nft --sync-period that is no duration exits 2 before the source starts",
      args: ["file", "--input", example, "to-local", "to-nft", "--sync-period", "soon"],
      code: 2,
      message: /--sync-period: "soon" is not a duration/,
    },
    {
      name: "the same with --dry-run",
      args: ["file", "--input", example, "to-local", "to-nft", "--dry-run", "--sync-period", "soon"],
      code: 2,
      message: /--sync-period: "soon" is not a duration/,
    },
    {
      name: "--sync-period 0 exits 2 (it would spin)",
      args: ["file", "--input", example, "to-local", "to-nft", "--sync-period", "0"],
      code: 2,
      message: /--sync-period: "0" is too short/,
    },
    {
      name: "a to-nft --table-name nft cannot take exits 2",
      args: ["file", "--input", example, "to-local", "to-nft", "--table-name", "bad name"],
      code: 2,
      message: /--table-name: not a valid nft table name/,
    },
    {
      name: "a to-ebpf map size that is no number exits 2",
      args: ["file", "--input", example, "to-local", "to-ebpf", "--bpf-map-backends", "lots"],
      code: 2,
      message: /--bpf-map-backends/,
    },
    {
      name: "a bad --nodeport-addresses exits 2 and names it",
      args: ["file", "--input", example, "to-local", "to-nft", "--nodeport-addresses", "10.0.0.0/99"],
      code: 2,
      message: /--nodeport-addresses: "10\.0\.0\.0\/99" is not a CIDR/,
    },
    {
      name: "a bad --api target of kpng local exits 2",
      args: ["local", "--api", "unix://relative.sock", "to-json"],
      code: 2,
      message: /a unix socket needs an absolute path/,
    },
    {
      name: "a bad --listen of to-api exits 2",
      args: ["file", "--input", example, "to-api", "--listen", "ftp://x"],
      code: 2,
      message: /--listen: "ftp:\/\/x" is not tcp:\/\/host:port or unix:\/\/\/path/,
    },
    {
      name: "a bad --metrics-address of to-api exits 2",
      args: ["file", "--input", example, "to-api", "--metrics-address", "10261"],
      code: 2,
      message: /--metrics-address: "10261" is not host:port/,
    },
    {
      name: "a missing file exits 1 and names it",
      args: ["file", "--input", "/nonexistent/cluster.yaml", "to-local", "to-json", "--once"],
      code: 1,
      message: /cannot read \/nonexistent\/cluster\.yaml: ENOENT/,
    },
  ];
  for (const tc of cases) {
    test(tc.name, async () => {
      const run = await kpng(tc.args);
      assert.equal(run.code, tc.code, run.stderr);
      assert.match(run.stderr, tc.message);
      assert.equal(run.stdout, "");
      // A usage error stops kpng before anything starts: no source or sink has logged a word.
      if (tc.code === 2) assert.doesNotMatch(run.stderr, /"msg"/);
    });
  }
});

describe("kpng file with a file that changes", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "kpng-cli-e2e-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test("a YAML syntax error at startup exits 1 with the position", async () => {
    const broken = join(dir, "broken.yaml");
    await writeFile(broken, "kind: Node\nmetadata: { name: [oops\n");
    const run = await kpng(["file", "--input", broken, "to-local", "to-json", "--once"]);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /broken\.yaml:\d+:\d+: YAML syntax error/);
  });

  test("watch mode prints a new document after the file changes, and exits 0 on SIGTERM", async () => {
    const file = join(dir, "cluster.yaml");
    await copyFile(example, file);
    const child = spawn(
      process.execPath,
      [cli, "file", "--input", file, "to-local", "to-json", "--node-name", "node-1"],
      {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    // The documents written so far, whole: a pipe may hand over the last one in parts.
    const documents = (): LocalStateJson[] => {
      const end = stdout.lastIndexOf("\n}\n");
      return (end < 0 ? "" : stdout.slice(0, end + 3))
        .split(/(?<=^\})\n/m)
        .filter((t) => t.trim() !== "")
        .map((t) => JSON.parse(t));
    };
    const waitForDocuments = (n: number) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`fewer than ${n} documents; stderr: ${stderr}`)),
          15_000,
        );
        const check = () => {
          if (documents().length >= n) {
            clearTimeout(timer);
            child.stdout.off("data", check);
            resolve();
          }
        };
        child.stdout.on("data", check);
        check();
      });
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    try {
      await waitForDocuments(1);
      assert.ok(documents()[0]?.services.some((s) => s.name === "web"));
      // Scale web down to its node-1 pod: the new state must show it.
      const text = await readFile(file, "utf8");
      const scaled = text.replace(
        / {2}- addresses: \[198\.51\.100\.18\][\s\S]*?name: web-6c9f7d-klmno \}\n/,
        "",
      );
      assert.notEqual(scaled, text, "the edit applies to the example");
      await writeFile(file, scaled);
      await waitForDocuments(2);
      const [first, second] = documents();
      assert.ok(second!.revision > first!.revision);
      assert.deepEqual(portOf(second!, "default/web", "http").internalEndpoints, ["198.51.100.2:8080"]);
    } finally {
      child.kill("SIGTERM");
    }
    assert.equal(await exited, 0, stderr);
  });
});
