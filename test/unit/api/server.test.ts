import assert from "node:assert/strict";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ApiServer } from "../../../src/api/server.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { eventually } from "../../support/eventually.ts";
import { gate, settle } from "../../support/settle.ts";
import { endpoint, FakeBrain, service, servicePort } from "./fixtures.ts";
import { kpngWatch, type RawOp } from "./kpng-client.ts";

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "kpng-api-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function startServer(brain: FakeBrain, instanceId = "i-1"): Promise<ApiServer> {
  const server = new ApiServer({
    listen: ["tcp://127.0.0.1:0"],
    localFeed: brain.feed,
    log: silentLogger,
    instanceId,
  });
  await server.start();
  return server;
}

const shape = (ops: RawOp[]) => ops.map((o) => (o.path === undefined ? o.op : `${o.op} ${o.path}`));

describe("localv1 watch, read by a kpng-style client (protos loaded at run time)", () => {
  test("a node whose local state is empty still gets Reset and Sync", async () => {
    const brain = new FakeBrain();
    brain.update("empty-node", []);
    const server = await startServer(brain);
    try {
      const [first] = await kpngWatch(server.addresses[0]!, "empty-node", 1);
      assert.deepEqual(shape(first!), ["Reset", "Sync"]);
    } finally {
      await server.stop();
    }
  });

  test("nothing is sent before the brain has a state for the node", async () => {
    const brain = new FakeBrain();
    const server = await startServer(brain);
    try {
      const watching = kpngWatch(server.addresses[0]!, "n1", 1);
      let done = false;
      void watching.then(() => {
        done = true;
      });
      await eventually(
        async () => server.streams().length === 1,
        "the server to hold the stream",
        30_000,
        10,
      );
      await settle(20);
      assert.equal(done, false);
      brain.update("n1", [service("a")]);
      const [first] = await watching;
      assert.equal(first![0]!.op, "Reset");
    } finally {
      await server.stop();
    }
  });

  test("values use kpng's field names and numbers; endpoints are keyed per IP and family", async () => {
    const brain = new FakeBrain();
    const dual = service("web", {
      clusterIPs: ["198.51.100.10", "2001:db8::10"],
      sessionAffinitySeconds: 600,
      externalTrafficPolicy: "Local",
      sourceRanges: ["203.0.113.0/24"],
      loadBalancerIPs: ["203.0.113.5"],
      type: "LoadBalancer",
      ports: [
        servicePort({
          name: "http",
          nodePort: 30080,
          endpointFamilies: ["IPv4", "IPv6"],
          internalEndpoints: [endpoint("192.0.2.1", 8080, { local: true }), endpoint("2001:db8::1", 8080)],
          externalEndpoints: [endpoint("192.0.2.1", 8080, { local: true })],
        }),
      ],
    });
    brain.update("n1", [dual]);
    const server = await startServer(brain);
    try {
      const [first] = await kpngWatch(server.addresses[0]!, "n1", 1);
      assert.deepEqual(shape(first!), [
        "Reset",
        "Set default/web",
        "Set default/web/192.0.2.1",
        "Set default/web/2001:db8::1",
        "Sync",
      ]);
      const svc = first![1]!.value!;
      assert.equal(svc.Namespace, "default");
      assert.equal(svc.Type, "LoadBalancer");
      assert.deepEqual(svc.IPs, {
        ClusterIPs: { V4: ["198.51.100.10"], V6: ["2001:db8::10"] },
        ExternalIPs: {},
        LoadBalancerIPs: { V4: ["203.0.113.5"] },
      });
      assert.deepEqual(svc.ClientIP, { TimeoutSeconds: 600 });
      assert.equal(svc.ExternalTrafficToLocal, true);
      assert.deepEqual(svc.IPFilters, [
        { TargetIPs: { V4: ["203.0.113.5"] }, SourceRanges: ["203.0.113.0/24"] },
      ]);
      assert.deepEqual(svc.Ports, [
        {
          Name: "http",
          Protocol: "TCP",
          Port: 80,
          NodePort: 30080,
          HasEndpoints: true,
          HasIPv4Endpoints: true,
          HasIPv6Endpoints: true,
        },
      ]);
      const v4 = first![2]!.value!;
      assert.deepEqual(v4.IPs, { V4: ["192.0.2.1"] });
      assert.equal(v4.Local, true);
      assert.deepEqual(v4.PortOverrides, [{ Name: "http", Port: 8080 }]);
      assert.deepEqual(v4.Scopes, { Internal: true, External: true });
      const v6 = first![3]!.value!;
      assert.deepEqual(v6.IPs, { V6: ["2001:db8::1"] });
      assert.deepEqual(
        v6.Scopes,
        { Internal: true },
        "eTP Local: a remote endpoint serves internal traffic only",
      );
      assert.deepEqual(v6.Conditions, { Ready: true, Serving: true });
      assert.deepEqual(first![4]!.sync, { InstanceID: "i-1", Revision: 1 });
    } finally {
      await server.stop();
    }
  });

  test("a change set orders service sets, endpoint deletes, endpoint sets, service deletes", async () => {
    const brain = new FakeBrain();
    brain.update("n1", [service("a"), service("b")]);
    const server = await startServer(brain);
    try {
      const firstSet = gate();
      const watching = kpngWatch(server.addresses[0]!, "n1", 2, {}, firstSet.open);
      await firstSet.promise;
      brain.update(
        "n1",
        [
          service("c"),
          service("a", {
            ports: [
              servicePort({
                internalEndpoints: [endpoint("192.0.2.2", 8080), endpoint("192.0.2.3", 8080)],
              }),
            ],
          }),
        ],
        ["default/b"],
      );
      const [, second] = await watching;
      assert.deepEqual(shape(second!), [
        "Set default/c",
        "Delete default/b/192.0.2.1",
        "Delete default/a/192.0.2.1",
        "Set default/a/192.0.2.2",
        "Set default/a/192.0.2.3",
        "Set default/c/192.0.2.1",
        "Delete default/b",
        "Sync",
      ]);
    } finally {
      await server.stop();
    }
  });

  test("resume with the same instance and a known revision sends only the delta", async () => {
    const brain = new FakeBrain();
    brain.update("n1", [service("a"), service("b")]);
    const server = await startServer(brain);
    try {
      const [first] = await kpngWatch(server.addresses[0]!, "n1", 1);
      const revision = first!.at(-1)!.sync!.Revision as number;
      brain.update("n1", [service("b", { clusterIPs: ["198.51.100.20"] })]);
      const [resumed] = await kpngWatch(server.addresses[0]!, "n1", 1, {
        InstanceID: "i-1",
        Revision: revision,
      });
      assert.deepEqual(shape(resumed!), ["Set default/b", "Sync"]);
    } finally {
      await server.stop();
    }
  });

  test("another instance id (a restarted brain) or an unknown revision gets Reset and everything", async () => {
    const brain = new FakeBrain();
    brain.update("n1", [service("a")]);
    const server = await startServer(brain, "i-2");
    try {
      const [other] = await kpngWatch(server.addresses[0]!, "n1", 1, { InstanceID: "i-1", Revision: 1 });
      assert.deepEqual(shape(other!), ["Reset", "Set default/a", "Set default/a/192.0.2.1", "Sync"]);
      const [unknown] = await kpngWatch(server.addresses[0]!, "n1", 1, { InstanceID: "i-2", Revision: 999 });
      assert.equal(unknown![0]!.op, "Reset");
    } finally {
      await server.stop();
    }
  });

  test("a unix socket is created with mode 0600, replacing a stale one", async () => {
    const brain = new FakeBrain();
    brain.update("n1", []);
    const path = join(dir, "proxy.sock");
    for (let round = 0; round < 2; round++) {
      const server = new ApiServer({ listen: [`unix://${path}`], localFeed: brain.feed, log: silentLogger });
      await server.start();
      assert.equal((await stat(path)).mode & 0o777, 0o600);
      const [first] = await kpngWatch(`unix://${path}`, "n1", 1);
      assert.deepEqual(shape(first!), ["Reset", "Sync"]);
      // The first round leaves its socket file behind, as a crashed server would.
      if (round === 0) server.forceStop();
      else await server.stop();
    }
  });
});
