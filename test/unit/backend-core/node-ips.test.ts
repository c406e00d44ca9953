import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { watchNodeIPs } from "../../../src/backend-core/node-ips.ts";
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

const stateWith = (nodeIPs?: readonly string[]): LocalState => ({
  node: "n1",
  revision: 1,
  services: new Map(),
  serviceCIDRs: [],
  ...(nodeIPs && { nodeIPs }),
});

describe("primary NodePort addresses from the Node object", () => {
  test("the Node object's InternalIP, not the default-route interface's address", async () => {
    const feed = manualFeed();
    feed.push(stateWith(["192.0.2.10"]));
    const w = await watchNodeIPs(feed, host, new AbortController().signal);
    assert.deepEqual(w.ips, ["192.0.2.10"]);
    assert.equal(w.from, "node");
    w.stop();
    assert.equal(feed.listeners, 0);
  });

  test("no Node object yet: the default-route interface's address, until the Node names others", async () => {
    const feed = manualFeed();
    feed.push(stateWith([]));
    const w = await watchNodeIPs(feed, host, new AbortController().signal);
    assert.deepEqual(w.ips, ["198.51.100.2"]);
    assert.equal(w.from, "host");
    let changed: readonly string[] | undefined;
    void w.changed.then((ips) => {
      changed = ips;
    });
    feed.push(stateWith(["198.51.100.2"]));
    await settle();
    assert.equal(changed, undefined, "the same address: nothing to do");
    feed.push(stateWith(["192.0.2.10"]));
    await settle();
    assert.deepEqual(changed, ["192.0.2.10"]);
    w.stop();
  });

  test("the Node's IPs change: reported; an empty list keeps the rules as they are", async () => {
    const feed = manualFeed();
    feed.push(stateWith(["192.0.2.10"]));
    const w = await watchNodeIPs(feed, host, new AbortController().signal);
    let changed: readonly string[] | undefined;
    void w.changed.then((ips) => {
      changed = ips;
    });
    feed.push(stateWith([]));
    await settle();
    assert.equal(changed, undefined);
    feed.push(stateWith(["192.0.2.10", "2001:db8::10"]));
    await settle();
    assert.deepEqual(changed, ["192.0.2.10", "2001:db8::10"]);
    w.stop();
  });

  test("a producer that does not carry the IPs (the watch API): the host's, and no listener kept", async () => {
    const feed = manualFeed();
    feed.push(stateWith(undefined));
    const w = await watchNodeIPs(feed, host, new AbortController().signal);
    assert.deepEqual(w.ips, ["198.51.100.2"]);
    assert.equal(w.from, "host");
    assert.equal(feed.listeners, 0);
  });

  test("stopped before the first state: no IPs", async () => {
    const feed = manualFeed();
    const stop = new AbortController();
    const pending = watchNodeIPs(feed, host, stop.signal);
    stop.abort();
    assert.equal((await pending).ips, undefined);
    assert.equal(feed.listeners, 0);
  });
});
