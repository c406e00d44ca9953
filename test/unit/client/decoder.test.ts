import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  fullDelta,
  localChangeFrames,
  localFullFrames,
  type NodeFacts,
} from "../../../src/api/local-diff.ts";
import { LocalStateDecoder } from "../../../src/client/decoder.ts";
import type { WireChangeSet } from "../../../src/client/watch.ts";
import type { LocalService } from "../../../src/model/local.ts";
import { endpoint, service, servicePort, wireOps } from "../api/fixtures.ts";

/** What the server would send to go from `before` to `after`, as the client receives it. */
function changeSet(before: LocalService[], after: LocalService[], reset = false): WireChangeSet {
  const map = (l: LocalService[]) => new Map(l.map((s) => [`${s.namespace}/${s.name}`, s]));
  const ops = wireOps(localChangeFrames(fullDelta(map(before), map(after))));
  return { reset, ops, instanceId: "i", revision: 1 };
}

const rich = service("rich", {
  type: "LoadBalancer",
  clusterIPs: ["2001:db8::10", "198.51.100.10"],
  externalIPs: ["203.0.113.9", "203.0.113.1"],
  loadBalancerIPs: ["203.0.113.5"],
  sourceRanges: ["203.0.113.0/24", "198.51.100.0/24"],
  sessionAffinitySeconds: 10800,
  internalTrafficPolicy: "Local",
  externalTrafficPolicy: "Local",
  healthCheckNodePort: 32000,
  localReadyEndpoints: 1,
  ports: [
    servicePort({
      name: "http",
      nodePort: 30080,
      hasEndpoints: true,
      endpointFamilies: ["IPv4", "IPv6"],
      internalEndpoints: [endpoint("192.0.2.1", 8080, { local: true })],
      externalEndpoints: [endpoint("192.0.2.1", 8080, { local: true }), endpoint("2001:db8::1", 8080)],
    }),
    servicePort({
      name: "dns",
      protocol: "UDP",
      port: 53,
      hasEndpoints: false,
      endpointFamilies: [],
      internalEndpoints: [
        endpoint("192.0.2.1", 5353, { local: true }),
        endpoint("192.0.2.7", 53, { ready: false, serving: true, terminating: true }),
      ],
      externalEndpoints: [],
    }),
  ],
});

describe("LocalService → wire → LocalService", () => {
  test("every field survives the round trip", () => {
    const decoder = new LocalStateDecoder("n1");
    const { state } = decoder.apply(changeSet([], [rich, service("plain")], true));
    assert.deepEqual(state.services.get("default/rich"), rich);
    assert.deepEqual(state.services.get("default/plain"), service("plain"));
  });

  test("an unchanged service keeps its object; a changed one gets a new one", () => {
    const decoder = new LocalStateDecoder("n1");
    const a = service("a");
    const b = service("b");
    const first = decoder.apply(changeSet([], [a, b], true)).state;
    const b2 = service("b", { ports: [servicePort({ internalEndpoints: [endpoint("192.0.2.9", 80)] })] });
    const second = decoder.apply(changeSet([a, b], [a, b2])).state;
    assert.equal(second.services.get("default/a"), first.services.get("default/a"));
    assert.notEqual(second.services.get("default/b"), first.services.get("default/b"));
    assert.deepEqual(second.services.get("default/b"), b2);
    assert.equal(second.revision, first.revision + 1);
  });

  test("a Reset with the same content changes nothing and keeps every object", () => {
    const decoder = new LocalStateDecoder("n1");
    const first = decoder.apply(changeSet([], [rich], true)).state;
    const again = decoder.apply(changeSet([], [rich], true));
    assert.equal(again.changed, false);
    assert.equal(again.state.services.get("default/rich"), first.services.get("default/rich"));
  });

  test("a Reset without a service deletes it", () => {
    const decoder = new LocalStateDecoder("n1");
    decoder.apply(changeSet([], [service("a"), service("b")], true));
    const { state, changed } = decoder.apply(changeSet([], [service("b")], true));
    assert.equal(changed, true);
    assert.deepEqual([...state.services.keys()], ["default/b"]);
  });

  test("deletes remove endpoints and services", () => {
    const decoder = new LocalStateDecoder("n1");
    const two = service("a", {
      ports: [servicePort({ internalEndpoints: [endpoint("192.0.2.1", 80), endpoint("192.0.2.2", 80)] })],
    });
    const one = service("a", { ports: [servicePort({ internalEndpoints: [endpoint("192.0.2.2", 80)] })] });
    decoder.apply(changeSet([], [two], true));
    assert.deepEqual(decoder.apply(changeSet([two], [one])).state.services.get("default/a"), one);
    assert.equal(decoder.apply(changeSet([one], [])).state.services.size, 0);
  });
});

describe("the Node's facts over the wire (NodeInfoSet)", () => {
  const node: NodeFacts = { ips: ["192.0.2.11", "2001:db8::11"], podCIDRs: ["10.244.1.0/24"] };
  const nodeDelta = (before: NodeFacts | undefined, after: NodeFacts | undefined): WireChangeSet => ({
    reset: false,
    ops: wireOps(localChangeFrames({ ...fullDelta(new Map(), new Map()), node: { before, after } })),
    instanceId: "i",
    revision: 2,
  });

  test("a full state carries them; a change replaces them; a reset forgets them", () => {
    const d = new LocalStateDecoder("n1");
    d.apply({
      reset: true,
      ops: wireOps(localFullFrames(new Map(), [], node)),
      instanceId: "i",
      revision: 1,
    });
    assert.deepEqual(d.state.nodeIPs, node.ips);
    assert.deepEqual(d.state.nodePodCIDRs, node.podCIDRs);
    const moved = { ips: ["192.0.2.12"], podCIDRs: ["10.244.7.0/24"] };
    assert.equal(d.apply(nodeDelta(node, moved)).changed, true);
    assert.deepEqual(d.state.nodeIPs, ["192.0.2.12"]);
    assert.deepEqual(d.state.nodePodCIDRs, ["10.244.7.0/24"]);
    assert.equal(nodeDelta(moved, moved).ops.length, 0, "unchanged: no op");
    d.apply({ reset: true, ops: [], instanceId: "i", revision: 3 });
    assert.equal(d.state.nodeIPs, undefined);
  });

  test("a Node without addresses or podCIDRs is known, with empty lists", () => {
    const d = new LocalStateDecoder("n1");
    d.apply({
      reset: true,
      ops: wireOps(localFullFrames(new Map(), [], { ips: [], podCIDRs: [] })),
      instanceId: "i",
      revision: 1,
    });
    assert.deepEqual(d.state.nodeIPs, []);
    assert.deepEqual(d.state.nodePodCIDRs, []);
  });

  test("an older server never sends them: not known, so backends use the host's addresses", () => {
    const d = new LocalStateDecoder("n1");
    d.apply({ reset: true, ops: wireOps(localFullFrames(new Map(), [])), instanceId: "i", revision: 1 });
    assert.equal(d.state.nodeIPs, undefined);
    assert.equal(d.state.nodePodCIDRs, undefined);
  });
});
