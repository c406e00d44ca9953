import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setImmediate as nextMacrotask } from "node:timers/promises";
import { LocalStateTracker } from "../../../src/brain/local-state-tracker.ts";
import { nodePrimaryIPs } from "../../../src/brain/node-ips.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import type { NodeAddress } from "../../../src/model/kube.ts";
import { node } from "./fixtures.ts";

const withAddresses = (...addresses: NodeAddress[]) => ({ ...node("n1"), addresses });
const internal = (address: string): NodeAddress => ({ type: "InternalIP", address });
const external = (address: string): NodeAddress => ({ type: "ExternalIP", address });
const hostname = (address: string): NodeAddress => ({ type: "Hostname", address });

describe("the node's primary IPs from its Node object (kube-proxy's choice)", () => {
  const rows: [string, NodeAddress[], string[]][] = [
    ["no addresses: none", [], []],
    ["a hostname is not an IP", [hostname("n1.example")], []],
    ["the InternalIP", [hostname("n1"), internal("192.0.2.10")], ["192.0.2.10"]],
    [
      "InternalIP before ExternalIP, whatever the order",
      [external("203.0.113.5"), internal("192.0.2.10")],
      ["192.0.2.10"],
    ],
    ["the ExternalIP when there is no InternalIP", [external("203.0.113.5")], ["203.0.113.5"]],
    ["the first of a family only", [internal("192.0.2.10"), internal("192.0.2.11")], ["192.0.2.10"]],
    [
      "dual-stack: the first listed family first",
      [internal("2001:db8::10"), internal("192.0.2.10")],
      ["2001:db8::10", "192.0.2.10"],
    ],
    [
      "the other family may come from an ExternalIP",
      [internal("192.0.2.10"), external("2001:db8::5")],
      ["192.0.2.10", "2001:db8::5"],
    ],
  ];
  for (const [name, addresses, expected] of rows) {
    test(name, () => assert.deepEqual(nodePrimaryIPs(withAddresses(...addresses)), expected));
  }
  test("an unknown node has none", () => assert.deepEqual(nodePrimaryIPs(undefined), []));
});

describe("nodeIPs in the local state", () => {
  test("follow the Node object, without a new revision, and keep their array while unchanged", async () => {
    const store = new ClusterStore();
    const tracker = new LocalStateTracker(store, "n1");
    store.subscribe((c) => tracker.update(c));
    store.synced();
    await nextMacrotask();
    assert.deepEqual(tracker.state.nodeIPs, []);
    store.upsert(withAddresses(internal("192.0.2.10")));
    await nextMacrotask();
    const first = tracker.state;
    assert.deepEqual(first.nodeIPs, ["192.0.2.10"]);
    store.upsert({
      ...withAddresses(internal("192.0.2.10")),
      metadata: { ...node("n1").metadata, resourceVersion: "2" },
    });
    await nextMacrotask();
    assert.equal(tracker.state.nodeIPs, first.nodeIPs, "same addresses: same array");
    store.upsert(withAddresses(internal("192.0.2.20")));
    await nextMacrotask();
    assert.deepEqual(tracker.state.nodeIPs, ["192.0.2.20"]);
    assert.notEqual(tracker.state, first, "a new state, so sinks see it");
    assert.equal(tracker.state.revision, first.revision, "no service changed");
  });
});

describe("nodePodCIDRs in the local state (--detect-local-mode NodeCIDR)", () => {
  test("follow the Node's spec.podCIDRs, without a new revision, and keep their array while unchanged", async () => {
    const store = new ClusterStore();
    const tracker = new LocalStateTracker(store, "n1");
    store.subscribe((c) => tracker.update(c));
    store.synced();
    await nextMacrotask();
    assert.deepEqual(tracker.state.nodePodCIDRs, [], "no Node object yet");
    store.upsert({ ...node("n1"), podCIDRs: ["10.244.1.0/24", "fd00:10:244:1::/64"] });
    await nextMacrotask();
    const first = tracker.state;
    assert.deepEqual(first.nodePodCIDRs, ["10.244.1.0/24", "fd00:10:244:1::/64"]);
    store.upsert({
      ...node("n1"),
      podCIDRs: ["10.244.1.0/24", "fd00:10:244:1::/64"],
      metadata: { ...node("n1").metadata, resourceVersion: "2" },
    });
    await nextMacrotask();
    assert.equal(tracker.state.nodePodCIDRs, first.nodePodCIDRs, "same CIDRs: same array");
    store.upsert({ ...node("n1"), podCIDRs: ["10.244.9.0/24"] });
    await nextMacrotask();
    assert.deepEqual(tracker.state.nodePodCIDRs, ["10.244.9.0/24"]);
    assert.notEqual(tracker.state, first, "a new state, so sinks see it");
    assert.equal(tracker.state.revision, first.revision, "no service changed");
  });
});
