import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type NodeChange, watchNode } from "../../../src/backend-core/node-watch.ts";
import type { HostNetwork } from "../../../src/host/host-network.ts";
import type { LocalState, LocalStateFeed } from "../../../src/model/local.ts";
import { settle } from "../../support/settle.ts";

/** The host of a node with two interfaces: the default route on eth0, the InternalIP on eth1. */
const host: HostNetwork = {
  defaultRouteInterfaces: async () => ["eth0"],
  interfaces: async () => [
    { ifname: "eth0", addresses: [{ ip: "198.51.100.2", scope: "global" }] },
    { ifname: "eth1", addresses: [{ ip: "192.0.2.10", scope: "global" }] },
  ],
};

/** A feed the test pushes states into; counts its listeners. */
function manualFeed(): LocalStateFeed & { push(s: LocalState): void; readonly listeners: number } {
  const listeners = new Set<(s: LocalState) => void | Promise<void>>();
  let last: LocalState | undefined;
  return {
    subscribe(listener) {
      listeners.add(listener);
      if (last !== undefined) void listener(last);
      return () => listeners.delete(listener);
    },
    push(s) {
      last = s;
      for (const l of listeners) void l(s);
    },
    get listeners() {
      return listeners.size;
    },
  };
}

const stateWith = (nodeIPs?: readonly string[], nodePodCIDRs?: readonly string[]): LocalState => ({
  node: "n1",
  revision: 1,
  services: new Map(),
  serviceCIDRs: [],
  ...(nodeIPs && { nodeIPs }),
  ...(nodePodCIDRs && { nodePodCIDRs }),
});

const IPS = { ips: true, podCIDRs: false };
const POD_CIDRS = { ips: false, podCIDRs: true };
const watchNodeIPs = (feed: LocalStateFeed, signal: AbortSignal) => watchNode(feed, host, signal, IPS);

describe("primary NodePort addresses from the Node object", () => {
  test("the Node object's InternalIP, not the default-route interface's address", async () => {
    const feed = manualFeed();
    feed.push(stateWith(["192.0.2.10"]));
    const w = await watchNodeIPs(feed, new AbortController().signal);
    assert.deepEqual(w.ips, ["192.0.2.10"]);
    assert.equal(w.ipsFrom, "node");
    w.stop();
    assert.equal(feed.listeners, 0);
  });

  test("no Node object yet: the default-route interface's address, until the Node names others", async () => {
    const feed = manualFeed();
    feed.push(stateWith([]));
    const w = await watchNodeIPs(feed, new AbortController().signal);
    assert.deepEqual(w.ips, ["198.51.100.2"]);
    assert.equal(w.ipsFrom, "host");
    let changed: NodeChange | undefined;
    void w.changed.then((c) => {
      changed = c;
    });
    feed.push(stateWith(["198.51.100.2"]));
    await settle();
    assert.equal(changed, undefined, "the same address: nothing to do");
    feed.push(stateWith(["192.0.2.10"]));
    await settle();
    assert.deepEqual(changed, { field: "IPs", was: ["198.51.100.2"], now: ["192.0.2.10"] });
    w.stop();
  });

  test("the Node's IPs change: reported; an empty list keeps the rules as they are", async () => {
    const feed = manualFeed();
    feed.push(stateWith(["192.0.2.10"]));
    const w = await watchNodeIPs(feed, new AbortController().signal);
    let changed: NodeChange | undefined;
    void w.changed.then((c) => {
      changed = c;
    });
    feed.push(stateWith([]));
    await settle();
    assert.equal(changed, undefined);
    feed.push(stateWith(["192.0.2.10", "2001:db8::10"]));
    await settle();
    assert.deepEqual(changed, { field: "IPs", was: ["192.0.2.10"], now: ["192.0.2.10", "2001:db8::10"] });
    w.stop();
  });

  test("a producer that does not carry the IPs (the watch API): the host's, and no listener kept", async () => {
    const feed = manualFeed();
    feed.push(stateWith(undefined));
    const w = await watchNodeIPs(feed, new AbortController().signal);
    assert.deepEqual(w.ips, ["198.51.100.2"]);
    assert.equal(w.ipsFrom, "host");
    assert.equal(feed.listeners, 0);
  });

  test("stopped before the first state: no IPs", async () => {
    const feed = manualFeed();
    const stop = new AbortController();
    const pending = watchNodeIPs(feed, stop.signal);
    stop.abort();
    assert.equal((await pending).started, false);
    assert.equal(feed.listeners, 0);
  });
});

describe("the Node's podCIDRs (--detect-local-mode NodeCIDR)", () => {
  test("the first state's podCIDRs; a change is reported, an empty list keeps the rules", async () => {
    const feed = manualFeed();
    feed.push(stateWith(["192.0.2.10"], ["10.244.1.0/24", "fd00:10:244:1::/64"]));
    const w = await watchNode(feed, host, new AbortController().signal, POD_CIDRS);
    assert.deepEqual(w.podCIDRs, ["10.244.1.0/24", "fd00:10:244:1::/64"]);
    assert.deepEqual(w.ips, [], "the IPs are not followed");
    let changed: NodeChange | undefined;
    void w.changed.then((c) => {
      changed = c;
    });
    feed.push(stateWith(["192.0.2.99"], ["10.244.1.0/24", "fd00:10:244:1::/64"]));
    feed.push(stateWith(["192.0.2.99"], []));
    await settle();
    assert.equal(changed, undefined, "an IP change or an emptied list is not a podCIDR change");
    feed.push(stateWith(["192.0.2.99"], ["10.244.7.0/24"]));
    await settle();
    assert.deepEqual(changed, {
      field: "podCIDRs",
      was: ["10.244.1.0/24", "fd00:10:244:1::/64"],
      now: ["10.244.7.0/24"],
    });
    w.stop();
    assert.equal(feed.listeners, 0);
  });

  test("a Node without podCIDRs yet: none, and reported once it has some", async () => {
    const feed = manualFeed();
    feed.push(stateWith([], []));
    const w = await watchNode(feed, host, new AbortController().signal, POD_CIDRS);
    assert.deepEqual(w.podCIDRs, []);
    let changed: NodeChange | undefined;
    void w.changed.then((c) => {
      changed = c;
    });
    feed.push(stateWith([], ["10.244.3.0/24"]));
    await settle();
    assert.deepEqual(changed?.now, ["10.244.3.0/24"]);
    w.stop();
  });

  test("a producer that does not carry them: none, and no listener kept", async () => {
    const feed = manualFeed();
    feed.push(stateWith(undefined, undefined));
    const w = await watchNode(feed, host, new AbortController().signal, POD_CIDRS);
    assert.deepEqual(w.podCIDRs, []);
    assert.equal(feed.listeners, 0);
  });
});
