// `kpng explain` through the command line, from a file and from a running brain's watch API:
// both sources give the same explanation, as JSON in the documented shape and as a table.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { endpointSlice, node, service } from "../../apiserver/fixtures.ts";
import { TestApiServer } from "../../apiserver/server.ts";
import { kpngRun } from "../../support/kpng-cli.ts";

const cli = ["src/cli/main.ts"];
const input = "examples/cluster.yaml";

const kpng = (args: string[], env: Record<string, string> = {}) => kpngRun(args, { env });

async function waitForSocket(path: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await stat(path).catch(() => undefined))) {
    if (Date.now() > deadline) throw new Error(`${path} never appeared`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("kpng explain", () => {
  let dir: string;
  let socket: string;
  let brain: ChildProcess;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "kpng-e2e-explain-"));
    socket = join(dir, "proxy.sock");
    brain = spawn(
      process.execPath,
      [...cli, "file", "--input", input, "to-api", "--listen", `unix://${socket}`],
      {
        stdio: "ignore",
      },
    );
    await waitForSocket(socket);
  });

  after(async () => {
    brain.kill("SIGTERM");
    await new Promise((r) => brain.once("exit", r));
    await rm(dir, { recursive: true, force: true });
  });

  test("-o json has the documented shape, and --input and --api agree", async () => {
    const args = ["explain", "default/ingress-local", "--node-name", "node-1", "-o", "json"];
    const [fromFile, fromApi] = await Promise.all([
      kpng([...args, "--input", input]),
      kpng([...args, "--api", `unix://${socket}`]),
    ]);
    assert.equal(fromFile.code, 0, fromFile.err);
    assert.equal(fromApi.code, 0, fromApi.err);
    const x = JSON.parse(fromFile.out);
    assert.deepEqual(JSON.parse(fromApi.out), x);
    assert.equal(x.service, "default/ingress-local");
    assert.equal(x.node, "node-1");
    const kinds = x.ports[0].kinds;
    assert.deepEqual(
      kinds.map((k: { kind: string; verdict: string }) => [k.kind, k.verdict]),
      [
        ["cluster-ip", "balance"],
        ["node-port", "drop"],
        ["load-balancer", "drop"],
      ],
    );
    for (const k of kinds) {
      for (const ep of k.endpoints) {
        assert.deepEqual(
          Object.keys(ep).filter((key) => ["ip", "port", "used", "reason"].includes(key)).length,
          4,
        );
      }
    }
  });

  test("an address names the Service and the traffic that arrives on it", async () => {
    const r = await kpng(["explain", "203.0.113.201:80/TCP", "--node-name", "node-3", "--input", input]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /Service default\/ingress-local/);
    assert.match(r.out, /load-balancer on 203\.0\.113\.201:80 \(policy Local\): balance/);
    assert.doesNotMatch(r.out, /cluster-ip on/);
  });

  test("a Service left to another proxy says so, and is served when its name is", async () => {
    const args = ["explain", "default/mesh-gateway", "--node-name", "node-1", "--input", input];
    const r = await kpng(args);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /not proxied/);
    assert.match(r.out, /service-proxy-name=other-proxy: left to that proxy/);
    const served = await kpng([...args, "--service-proxy-name", ",other-proxy"]);
    assert.match(served.out, /: proxied/);
  });

  test("bad command lines exit 2 with what to fix", async () => {
    const noSource = await kpng(["explain", "default/web", "--node-name", "n1"]);
    assert.equal(noSource.code, 2);
    assert.match(noSource.err, /exactly one source/);
    const badTarget = await kpng(["explain", "web", "--input", input]);
    assert.equal(badTarget.code, 2);
    assert.match(badTarget.err, /neither NAMESPACE\/NAME nor IP:PORT/);
    const badRules = await kpng(["explain", "default/web", "--input", input, "--rules", "nope"]);
    assert.equal(badRules.code, 2);
    assert.match(badRules.err, /--rules: no backend "nope"/);
  });

  test("--kubeconfig/--master: one list from the API server, Services of every proxy name", async () => {
    const api = await TestApiServer.start();
    try {
      api.create(node("node-1"));
      api.create(service("web"));
      api.create(endpointSlice("web-1", "web", { addresses: ["203.0.113.5"], nodeName: "node-2" }));
      const legacy = { "service.kubernetes.io/service-proxy-name": "legacy" };
      api.create(service("old", { clusterIP: "198.51.100.11", labels: legacy }));
      api.create(endpointSlice("old-1", "old", { addresses: ["203.0.113.6"], labels: legacy }));
      const env = { KUBECONFIG: "", HOME: "/nonexistent" };
      const web = await kpng(
        ["explain", "default/web", "--master", api.url, "--node-name", "node-1", "-o", "json"],
        env,
      );
      assert.equal(web.code, 0, web.err);
      const x = JSON.parse(web.out);
      assert.deepEqual(
        x.ports[0].kinds[0].endpoints.map((e: { ip: string; used: boolean; reason: string }) => [
          e.ip,
          e.used,
          e.reason,
        ]),
        [["203.0.113.5", true, "ready"]],
      );
      const old = await kpng(["explain", "default/old", "--master", api.url, "--node-name", "node-1"], env);
      assert.equal(old.code, 0, old.err);
      assert.match(old.out, /default\/old .*not proxied/);
      assert.match(old.out, /service-proxy-name=legacy: left to that proxy/);
    } finally {
      await api.close();
    }
  });

  test("an unknown Service exits 1 naming it", async () => {
    const r = await kpng(["explain", "default/missing", "--input", input]);
    assert.equal(r.code, 1);
    assert.match(r.err, /no Service default\/missing/);
  });
});
