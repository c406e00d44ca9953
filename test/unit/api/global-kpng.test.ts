// globalv1 as kpng's `api` source reads it: protos loaded at run time, no code of ours, values
// in kpng's messages (ServiceInfo, EndpointInfo, NodeInfo) under kpng's path formats.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ApiServer } from "../../../src/api/server.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import type { KubeObject } from "../../../src/model/kube.ts";
import { parseKubeObject } from "../../../src/model/validate.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { gate, settle } from "../../support/settle.ts";
import { kpngGlobalWatch, type RawOp } from "./kpng-client.ts";

function parse(raw: unknown): KubeObject {
  const r = parseKubeObject(raw);
  if (!r.ok) throw new Error(r.reason);
  return r.value;
}

const svc = parse({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "web", namespace: "shop", uid: "u1", resourceVersion: "1" },
  spec: {
    type: "NodePort",
    clusterIP: "198.51.100.10",
    clusterIPs: ["198.51.100.10"],
    ipFamilies: ["IPv4"],
    sessionAffinity: "ClientIP",
    sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } },
    externalTrafficPolicy: "Local",
    ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080, nodePort: 30080 }],
  },
});
const slice = parse({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: {
    name: "web-abc",
    namespace: "shop",
    uid: "u2",
    resourceVersion: "2",
    labels: { "kubernetes.io/service-name": "web" },
  },
  addressType: "IPv4",
  ports: [{ name: "http", protocol: "TCP", port: 8080 }],
  endpoints: [
    {
      addresses: ["192.0.2.1"],
      conditions: { ready: true },
      nodeName: "node-a",
      zone: "zone-1",
      hints: { forZones: [{ name: "zone-1" }] },
      targetRef: { kind: "Pod", name: "web-1", namespace: "shop" },
    },
    {
      addresses: ["192.0.2.2"],
      conditions: { ready: false, serving: true, terminating: true },
      nodeName: "node-b",
      targetRef: { kind: "Pod", name: "web-2", namespace: "shop" },
    },
  ],
});
const node = parse({
  apiVersion: "v1",
  kind: "Node",
  metadata: {
    name: "node-a",
    uid: "u3",
    resourceVersion: "3",
    labels: { "topology.kubernetes.io/zone": "zone-1", "kubernetes.io/hostname": "node-a", other: "x" },
  },
  status: { addresses: [{ type: "InternalIP", address: "203.0.113.1" }] },
});

const byPath = (ops: RawOp[]) => new Map(ops.filter((o) => o.op === "Set").map((o) => [o.path!, o]));

describe("globalv1 read by a kpng-style client", () => {
  test("ServiceInfo, EndpointInfo and NodeInfo in kpng's paths and fields; changes follow", async () => {
    const store = new ClusterStore({ log: silentLogger });
    store.replace("Service", [svc]);
    store.replace("EndpointSlice", [slice]);
    store.replace("Node", [node]);
    store.synced();
    await settle();
    const server = new ApiServer({
      listen: ["tcp://127.0.0.1:0"],
      localFeed: () => ({ subscribe: () => () => {} }),
      globalStore: store,
      log: silentLogger,
      instanceId: "g",
    });
    await server.start();
    try {
      const firstSet = gate();
      const watching = kpngGlobalWatch(server.addresses[0]!, 2, firstSet.open);
      await firstSet.promise;
      store.delete("Node", "node-a");
      const [first, second] = await watching;

      assert.deepEqual(
        first!.map((o) => (o.path === undefined ? o.op : `${o.op} ${o.set} ${o.path}`)),
        [
          "Reset",
          "Set GlobalNodeInfos |node-a||",
          "Set GlobalServiceInfos shop|web||",
          "Set GlobalEndpointInfos shop|web|web-abc|192.0.2.1",
          "Set GlobalEndpointInfos shop|web|web-abc|192.0.2.2",
          "Sync",
        ],
        "nodes, services, endpoints; paths ns|name|source|key as kpng's store",
      );
      const values = byPath(first!);

      const serviceInfo = values.get("shop|web||")!.value!;
      assert.ok(Number(serviceInfo.Hash) > 0, "kpng skips values whose Hash did not change");
      const s = serviceInfo.Service as Record<string, unknown>;
      assert.equal(s.Namespace, "shop");
      assert.equal(s.Name, "web");
      assert.equal(s.Type, "NodePort");
      assert.deepEqual(s.IPs, {
        ClusterIPs: { V4: ["198.51.100.10"] },
        ExternalIPs: {},
        LoadBalancerIPs: {},
      });
      assert.deepEqual(s.Ports, [
        { Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080, TargetPort: 8080 },
      ]);
      assert.deepEqual(s.ClientIP, { TimeoutSeconds: 600 });
      assert.equal(s.ExternalTrafficToLocal, true);

      const ready = values.get("shop|web|web-abc|192.0.2.1")!.value!;
      assert.ok(Number(ready.Hash) > 0);
      assert.equal(ready.Namespace, "shop");
      assert.equal(ready.ServiceName, "web");
      assert.equal(ready.SourceName, "web-abc");
      assert.equal(ready.PodName, "web-1");
      assert.deepEqual((ready.Endpoint as Record<string, unknown>).IPs, { V4: ["192.0.2.1"] });
      assert.deepEqual((ready.Endpoint as Record<string, unknown>).PortOverrides, [
        { Name: "http", Port: 8080 },
      ]);
      assert.deepEqual(ready.Conditions, { Ready: true, Serving: true });
      assert.deepEqual(ready.Topology, { Node: "node-a", Zone: "zone-1" });
      assert.deepEqual(ready.Hints, { Zones: ["zone-1"] });

      const terminating = values.get("shop|web|web-abc|192.0.2.2")!.value!;
      assert.deepEqual(
        terminating.Conditions,
        { Serving: true, Terminating: true },
        "Ready false is the default",
      );
      assert.deepEqual(terminating.Topology, { Node: "node-b" });

      const nodeInfo = values.get("|node-a||")!.value!;
      assert.ok(Number(nodeInfo.Hash) > 0);
      assert.deepEqual(nodeInfo.Node, {
        Name: "node-a",
        Topology: { Node: "node-a", Zone: "zone-1" },
        Labels: { "topology.kubernetes.io/zone": "zone-1", "kubernetes.io/hostname": "node-a" },
      });

      assert.deepEqual(
        second!.map((o) => (o.path === undefined ? o.op : `${o.op} ${o.set} ${o.path}`)),
        ["Delete GlobalNodeInfos |node-a||", "Sync"],
      );
    } finally {
      await server.stop();
    }
  });
});
