// Where the kube source finds its API server and credentials.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import { type Environment, loadKubeConfig } from "../../../src/kube/kubeconfig.ts";
import { PlainConnection } from "../../../src/kube/service-account.ts";
import { KubeConfigTransport } from "../../../src/kube/transport.ts";
import { TestApiServer } from "../../apiserver/server.ts";

function kubeconfig(clusters: Record<string, string>, current: string, user: Record<string, unknown> = {}) {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: Object.entries(clusters).map(([name, server]) => ({ name, cluster: { server } })),
    users: [{ name: "u", user }],
    contexts: Object.keys(clusters).map((name) => ({ name, context: { cluster: name, user: "u" } })),
    "current-context": current,
  });
}

describe("loadKubeConfig", () => {
  let dir: string;
  let file: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "kpng-kubeconfig-"));
    file = join(dir, "config");
    writeFileSync(file, kubeconfig({ one: "https://192.0.2.1:6443", two: "https://192.0.2.2:6443" }, "one"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const env = (vars: Record<string, string>, files: string[] = []): Environment => ({
    env: vars,
    fileExists: (p) => files.includes(p),
    homeDir: "/home/nobody",
  });
  const server = (loaded: ReturnType<typeof loadKubeConfig>) => loaded.config.getCurrentCluster()?.server;

  it("--kubeconfig uses the file's current context", () => {
    assert.equal(server(loadKubeConfig({ kubeconfig: file }, env({}, [file]))), "https://192.0.2.1:6443");
  });

  it("--context picks another context", () => {
    assert.equal(
      server(loadKubeConfig({ kubeconfig: file, context: "two" }, env({}, [file]))),
      "https://192.0.2.2:6443",
    );
  });

  it("an unknown --context is an error naming the known ones", () => {
    assert.throws(
      () => loadKubeConfig({ kubeconfig: file, context: "three" }, env({}, [file])),
      /has: one, two/,
    );
  });

  it("$KUBECONFIG is read when --kubeconfig is not given", () => {
    assert.equal(server(loadKubeConfig({}, env({ KUBECONFIG: file }, [file]))), "https://192.0.2.1:6443");
  });

  it("--master overrides the kubeconfig's server", () => {
    assert.equal(
      server(loadKubeConfig({ kubeconfig: file, master: "https://203.0.113.1" }, env({}, [file]))),
      "https://203.0.113.1",
    );
  });

  it("--master alone is enough", () => {
    assert.equal(
      server(loadKubeConfig({ master: "http://127.0.0.1:8080" }, env({}))),
      "http://127.0.0.1:8080",
    );
  });

  it("in a pod, the service account is used", () => {
    const loaded = loadKubeConfig(
      {},
      env({ KUBERNETES_SERVICE_HOST: "192.0.2.9", KUBERNETES_SERVICE_PORT: "443" }, [
        "/var/run/secrets/kubernetes.io/serviceaccount/token",
      ]),
    );
    assert.equal(loaded.origin, "in-cluster service account");
    assert.equal(server(loaded), "https://192.0.2.9:443");
    // No kubeconfig to read, so the Kubernetes client library (and its memory) is not loaded.
    assert.ok(loaded.config instanceof PlainConnection);
  });

  it("--master alone needs no kubeconfig either", () => {
    const loaded = loadKubeConfig({ master: "https://203.0.113.1:6443" }, env({}));
    assert.ok(loaded.config instanceof PlainConnection);
  });

  it("with nothing configured, says what to do", () => {
    assert.throws(() => loadKubeConfig({}, env({})), /pass --kubeconfig or --master/);
  });

  it("a missing --kubeconfig file is an error", () => {
    assert.throws(() => loadKubeConfig({ kubeconfig: join(dir, "missing") }, env({})), /does not exist/);
  });
});

describe("KubeConfigTransport credentials", () => {
  let dir: string;
  let api: TestApiServer;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "kpng-exec-"));
    api = await TestApiServer.start({ bookmarkIntervalMs: 0 });
  });
  after(async () => {
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function getServices(transport: KubeConfigTransport): Promise<void> {
    const res = await transport.get("/api/v1/services", AbortSignal.timeout(5000));
    for await (const _ of res) {
      // drain
    }
  }

  it("sends a static token as a Bearer header", async () => {
    const file = join(dir, "token-config");
    writeFileSync(file, kubeconfig({ test: api.url }, "test", { token: "static-token" }));
    const transport = new KubeConfigTransport(loadKubeConfig({ kubeconfig: file }).config);
    await getServices(transport);
    assert.equal(api.requests.at(-1)?.headers.authorization, "Bearer static-token");
  });

  it("reads a user's tokenFile (kubeadm's kube-proxy kubeconfig.conf) as a Bearer token", async () => {
    const file = join(dir, "token-file-config");
    const token = join(dir, "token");
    writeFileSync(token, "file-token-1");
    writeFileSync(file, kubeconfig({ test: api.url }, "test", { tokenFile: token }));
    const transport = new KubeConfigTransport(loadKubeConfig({ kubeconfig: file }).config);
    await getServices(transport);
    assert.equal(api.requests.at(-1)?.headers.authorization, "Bearer file-token-1");
  });

  it("the service account's token file is read on every request, so the kubelet's rotation is seen", async () => {
    const token = join(dir, "sa-token");
    writeFileSync(token, "sa-token-1\n");
    const transport = new KubeConfigTransport(new PlainConnection(api.url, { tokenFile: token }));
    await getServices(transport);
    writeFileSync(token, "sa-token-2\n");
    await getServices(transport);
    const tokens = api.requests.slice(-2).map((r) => r.headers.authorization);
    assert.deepEqual(tokens, ["Bearer sa-token-1", "Bearer sa-token-2"]);
  });

  it("--master alone sends no credentials", async () => {
    const transport = new KubeConfigTransport(
      loadKubeConfig({ master: api.url }, { env: {}, fileExists: () => false, homeDir: "/nonexistent" })
        .config,
    );
    await getServices(transport);
    assert.equal(api.requests.at(-1)?.headers.authorization, undefined);
  });

  it("runs an exec plugin again when its token has expired, so rotated tokens are used", async () => {
    const file = join(dir, "exec-config");
    const exec = {
      apiVersion: "client.authentication.k8s.io/v1",
      command: process.execPath,
      args: [join(import.meta.dirname, "fixtures", "exec-credential.ts")],
      env: [{ name: "COUNTER_FILE", value: join(dir, "counter") }],
      interactiveMode: "Never",
    };
    writeFileSync(file, kubeconfig({ test: api.url }, "test", { exec }));
    const transport = new KubeConfigTransport(loadKubeConfig({ kubeconfig: file }).config);
    await getServices(transport);
    await getServices(transport);
    const tokens = api.requests.slice(-2).map((r) => r.headers.authorization);
    assert.deepEqual(tokens, ["Bearer token-1", "Bearer token-2"]);
  });
});
