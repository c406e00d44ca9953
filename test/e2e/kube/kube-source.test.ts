// The kube source end to end: the CLI against the test API server, printing local states.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { stringify } from "yaml";
import { endpointSlice, node, service, serviceCIDR } from "../../apiserver/fixtures.ts";
import { TestApiServer } from "../../apiserver/server.ts";
import { endpointsOf, KpngProcess, serviceNames } from "./kpng-process.ts";

const PROXY_NAME_LABEL = "service.kubernetes.io/service-proxy-name";

function report(line: string): void {
  process.stdout.write(`# ${line}\n`);
}

describe("kpng kube … to-local to-json", () => {
  let api: TestApiServer;
  let kpng: KpngProcess | undefined;
  let dir: string;

  beforeEach(async () => {
    api = await TestApiServer.start({ bookmarkIntervalMs: 500 });
    dir = mkdtempSync(join(tmpdir(), "kpng-e2e-kube-"));
    api.create(node("node-1"));
  });

  afterEach(async () => {
    await kpng?.stop();
    kpng = undefined;
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function start(...sourceArgs: string[]): KpngProcess {
    kpng = new KpngProcess([
      "kube",
      ...sourceArgs,
      "--watch-inactivity-timeout",
      "2s",
      "to-local",
      "to-json",
      "--node-name",
      "node-1",
    ]);
    return kpng;
  }

  function withWeb(): void {
    api.create(service("web"));
    api.create(endpointSlice("web-1", "web", { addresses: ["203.0.113.5"] }));
  }

  it("shows objects created, updated and deleted (through a generated kubeconfig)", async () => {
    const kubeconfig = join(dir, "kubeconfig");
    writeFileSync(
      kubeconfig,
      stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name: "test", cluster: { server: api.url } }],
        users: [{ name: "tester", user: { token: "e2e-token" } }],
        contexts: [{ name: "test", context: { cluster: "test", user: "tester" } }],
        "current-context": "test",
      }),
    );
    withWeb();
    const p = start("--kubeconfig", kubeconfig);
    await p.waitFor("web", (d) => endpointsOf(d, "default/web").includes("203.0.113.5:8080"));
    assert.ok(api.requests.every((r) => r.headers.authorization === "Bearer e2e-token"));

    api.create(service("api", { clusterIP: "198.51.100.11" }));
    api.create(endpointSlice("api-1", "api", { addresses: ["203.0.113.6"] }));
    const created = await p.waitFor("api", (d) => endpointsOf(d, "default/api").includes("203.0.113.6:8080"));

    api.update(endpointSlice("web-1", "web", { addresses: ["203.0.113.7"] }));
    const updated = await p.waitFor("web moved", (d) =>
      endpointsOf(d, "default/web").includes("203.0.113.7:8080"),
    );

    api.delete("Service", "default/api");
    const deleted = await p.waitFor("api gone", (d) => !serviceNames(d).includes("default/api"));
    report(`create ${created} ms, update ${updated} ms, delete ${deleted} ms (API write → printed state)`);
  });

  it("a service labelled for another proxy vanishes, and comes back when the label goes", async () => {
    withWeb();
    const p = start("--master", api.url);
    await p.waitFor("web", (d) => serviceNames(d).includes("default/web"));
    const other = { [PROXY_NAME_LABEL]: "other-proxy" };
    api.update(service("web", { labels: other }));
    api.update(endpointSlice("web-1", "web", { labels: other }));
    await p.waitFor("web gone", (d) => !serviceNames(d).includes("default/web"));
    api.update(service("web"));
    api.update(endpointSlice("web-1", "web"));
    await p.waitFor("web back", (d) => endpointsOf(d, "default/web").includes("203.0.113.5:8080"));
  });

  it("recovers from a compaction (410) during which a service was deleted", async () => {
    withWeb();
    api.create(service("doomed", { clusterIP: "198.51.100.12" }));
    const p = start("--master", api.url);
    await p.waitFor(
      "both",
      (d) => serviceNames(d).includes("default/doomed") && serviceNames(d).includes("default/web"),
    );
    await api.stop();
    api.delete("Service", "default/doomed");
    api.compact();
    const up = Date.now();
    await api.listen();
    const recovered = await p.waitFor("doomed gone", (d) => !serviceNames(d).includes("default/doomed"));
    assert.deepEqual(serviceNames(p.latest!), ["default/web"]);
    report(
      `410 after compaction: delete applied ${recovered} ms after the API server came back (${Date.now() - up} ms)`,
    );
    assert.match(p.stderr, /expired \(410\); listing again/);
  });

  it("survives the API server restarting (state kept, and state lost)", async () => {
    withWeb();
    const p = start("--master", api.url);
    await p.waitFor("web", (d) => serviceNames(d).includes("default/web"));

    await api.restart({ keepState: true, downMs: 1000 });
    api.create(service("after-restart", { clusterIP: "198.51.100.13" }));
    const kept = await p.waitFor("after-restart", (d) => serviceNames(d).includes("default/after-restart"));
    report(`API server down 1 s, state kept: new object printed ${kept} ms after it came back`);
    assert.ok(serviceNames(p.latest!).includes("default/web"), "nothing lost across the restart");

    await api.restart({ keepState: false, downMs: 1000 });
    api.create(service("fresh", { clusterIP: "198.51.100.14" }));
    const lost = await p.waitFor("only fresh", (d) => serviceNames(d).join() === "default/fresh");
    report(`API server down 1 s, state lost: relisted and converged ${lost} ms after it came back`);
  });

  it("survives the API server going silent (inactivity timeout 2 s)", async () => {
    withWeb();
    const p = start("--master", api.url);
    await p.waitFor("web", (d) => serviceNames(d).includes("default/web"));
    api.silence();
    const silencedAt = Date.now();
    await new Promise((r) => setTimeout(r, 3000));
    api.silence(false);
    api.create(service("after-silence", { clusterIP: "198.51.100.15" }));
    const seen = await p.waitFor("after-silence", (d) => serviceNames(d).includes("default/after-silence"));
    report(
      `silent 3 s: new object printed ${seen} ms after the server answered again (${Date.now() - silencedAt} ms after the silence began)`,
    );
    assert.ok(serviceNames(p.latest!).includes("default/web"), "the last state was served throughout");
    // A stalled watch stays stalled, so only the inactivity timeout can have brought the new object.
    assert.match(p.stderr, /"reason":"inactive"/);
  });

  it("prints nothing before the initial sync: a withheld EndpointSlice list means no output", async () => {
    withWeb();
    api.withhold("endpointslices");
    const p = start("--master", api.url);
    // Until the other resources are watched (a deadline, not a fixed time: a loaded machine starts
    // kpng slowly), and a while after, nothing may be printed.
    const watched = () => api.requests.some((r) => r.resource === "services" && r.watch);
    const deadline = Date.now() + 30_000;
    let quietUntil = Number.POSITIVE_INFINITY;
    while (Date.now() < quietUntil) {
      assert.equal(p.docs.length, 0, "a state was printed before every resource was listed");
      assert.ok(Date.now() < deadline, "the other resources were read");
      if (quietUntil === Number.POSITIVE_INFINITY && watched()) quietUntil = Date.now() + 1000;
      await new Promise((r) => setTimeout(r, 50));
    }
    api.withhold("endpointslices", false);
    await p.waitFor("web", (d) => endpointsOf(d, "default/web").includes("203.0.113.5:8080"));
    assert.equal(p.docs.length, 1, "the first state printed is already complete");
  });

  it("carries the cluster's Service ranges from ServiceCIDRs, following changes", async () => {
    withWeb();
    api.create(serviceCIDR("kubernetes", ["198.51.100.0/24", "2001:db8:1::/112"]));
    const p = start("--master", api.url);
    await p.waitFor("the ranges", (d) => d.serviceCIDRs.join(",") === "198.51.100.0/24,2001:db8:1::/112");
    api.create(serviceCIDR("more", ["203.0.113.0/24"]));
    await p.waitFor("an added range", (d) => d.serviceCIDRs.includes("203.0.113.0/24"));
    api.delete("ServiceCIDR", "kubernetes");
    await p.waitFor("a deleted range", (d) => d.serviceCIDRs.join(",") === "203.0.113.0/24");
  });

  it("--service-cidrs replaces them and ServiceCIDRs are not read", async () => {
    withWeb();
    api.create(serviceCIDR("kubernetes", ["198.51.100.0/24"]));
    const p = start("--master", api.url, "--service-cidrs", "192.0.2.0/24");
    await p.waitFor("web", (d) => endpointsOf(d, "default/web").includes("203.0.113.5:8080"));
    assert.deepEqual(p.latest?.serviceCIDRs, ["192.0.2.0/24"]);
    assert.ok(!api.requests.some((r) => r.resource === "servicecidrs"));
  });
});
