import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  followNode,
  type NodeFacts,
  rulesAddresses,
  rulesChanged,
  watchNode,
} from "../../../src/backend-core/node-watch.ts";
import { type HostAddresses, HostAddressWatch } from "../../../src/host/address-watch.ts";
import type { LocalState, LocalStateFeed } from "../../../src/model/local.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { registry } from "../../../src/observability/metrics.ts";
import { FakeClock } from "../../support/fake-clock.ts";
import { settle } from "../../support/settle.ts";

/** A node with two interfaces: the default route on eth0 (198.51.100.2), the InternalIP on eth1. */
const HOST: HostAddresses = { all: ["127.0.0.1", "198.51.100.2", "192.0.2.10"], primary: ["198.51.100.2"] };

/** The node's addresses as a test sets them: the next poll reads `next`. */
function fakeAddresses(initial = HOST) {
  let next = initial;
  const watch = new HostAddressWatch({
    read: async () => next,
    initial,
    clock: new FakeClock(),
    log: silentLogger,
  });
  return {
    watch,
    async set(addresses: HostAddresses) {
      next = addresses;
      await watch.poll();
    },
  };
}

const host = fakeAddresses().watch;

async function addressChanges(): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === "kpng_node_address_changes_total");
  return Number(m?.values.find((v) => v.labels.backend === "test")?.value ?? 0);
}
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
  serviceCIDRs: { IPv4: [], IPv6: [] },
  ...(nodeIPs && { nodeIPs }),
  ...(nodePodCIDRs && { nodePodCIDRs }),
});

const IPS = { ips: true, podCIDRs: false };
const POD_CIDRS = { ips: false, podCIDRs: true };
const watchNodeIPs = (feed: LocalStateFeed, signal: AbortSignal) => watchNode(feed, host, signal, IPS);

/** Every fact the watch reports, in order. */
function recorded(w: { current(): NodeFacts; subscribe(l: () => void): () => void }): NodeFacts[] {
  const seen: NodeFacts[] = [];
  w.subscribe(() => seen.push(w.current()));
  return seen;
}

describe("primary NodePort addresses from the Node object", () => {
  test("the Node object's InternalIP, not the default-route interface's address", async () => {
    const feed = manualFeed();
    feed.push(stateWith(["192.0.2.10"]));
    const w = await watchNodeIPs(feed, new AbortController().signal);
    assert.deepEqual(w.current().primaryIPs, ["192.0.2.10"]);
    assert.equal(w.current().primaryFrom, "node");
    w.stop();
    assert.equal(feed.listeners, 0);
  });

  test("no Node object yet: the default-route interface's address, until the Node names others", async () => {
    const feed = manualFeed();
    feed.push(stateWith([]));
    const w = await watchNodeIPs(feed, new AbortController().signal);
    assert.deepEqual(w.current().primaryIPs, ["198.51.100.2"]);
    assert.equal(w.current().primaryFrom, "host");
    const seen = recorded(w);
    feed.push(stateWith(["192.0.2.10"]));
    await settle();
    assert.deepEqual(
      seen.map((f) => [f.primaryFrom, f.primaryIPs]),
      [["node", ["192.0.2.10"]]],
    );
    w.stop();
  });

  test("the Node's IPs change: reported each time; an empty list keeps the rules as they are", async () => {
    const feed = manualFeed();
    feed.push(stateWith(["192.0.2.10"]));
    const w = await watchNodeIPs(feed, new AbortController().signal);
    const seen = recorded(w);
    feed.push(stateWith([]));
    feed.push(stateWith(["192.0.2.10"]));
    await settle();
    assert.equal(seen.length, 0, "emptied, or the same: nothing to do");
    feed.push(stateWith(["192.0.2.10", "2001:db8::10"]));
    feed.push(stateWith(["192.0.2.11"]));
    await settle();
    assert.deepEqual(
      seen.map((f) => f.primaryIPs),
      [["192.0.2.10", "2001:db8::10"], ["192.0.2.11"]],
    );
    w.stop();
  });

  test("a producer that does not carry the IPs (the watch API): the host's, and no listener kept", async () => {
    const feed = manualFeed();
    feed.push(stateWith(undefined));
    const w = await watchNodeIPs(feed, new AbortController().signal);
    assert.deepEqual(w.current().primaryIPs, ["198.51.100.2"]);
    assert.equal(w.current().primaryFrom, "host");
    assert.equal(feed.listeners, 0);
  });

  test("stopped before the first state: not started", async () => {
    const feed = manualFeed();
    const stop = new AbortController();
    const pending = watchNodeIPs(feed, stop.signal);
    stop.abort();
    assert.equal((await pending).started, false);
    assert.equal(feed.listeners, 0);
  });
});

describe("the node's interfaces", () => {
  test("an address added to an interface is a change; the primary follows the default-route interface", async () => {
    const addresses = fakeAddresses();
    const feed = manualFeed();
    feed.push(stateWith(undefined));
    const w = await watchNode(feed, addresses.watch, new AbortController().signal, IPS);
    const seen = recorded(w);
    await addresses.set(HOST);
    assert.equal(seen.length, 0, "the same addresses");
    await addresses.set({ all: [...HOST.all, "192.0.2.7"], primary: HOST.primary });
    await addresses.set({ all: [...HOST.all, "198.51.100.9"], primary: ["198.51.100.2", "198.51.100.9"] });
    assert.deepEqual(seen, [
      {
        primaryIPs: ["198.51.100.2"],
        primaryFrom: "host",
        podCIDRs: [],
        hostIPs: [...HOST.all, "192.0.2.7"],
      },
      {
        primaryIPs: ["198.51.100.2", "198.51.100.9"],
        primaryFrom: "host",
        podCIDRs: [],
        hostIPs: [...HOST.all, "198.51.100.9"],
      },
    ]);
    w.stop();
    await addresses.set(HOST);
    assert.equal(seen.length, 2, "nothing after stop");
  });

  test("with the Node's IPs, a new address on the default-route interface leaves the primary IPs", async () => {
    const addresses = fakeAddresses();
    const feed = manualFeed();
    feed.push(stateWith(["192.0.2.10"]));
    const w = await watchNode(feed, addresses.watch, new AbortController().signal, IPS);
    await addresses.set({ all: [...HOST.all, "198.51.100.9"], primary: ["198.51.100.2", "198.51.100.9"] });
    assert.deepEqual(w.current().primaryIPs, ["192.0.2.10"]);
    assert.deepEqual(w.current().hostIPs, [...HOST.all, "198.51.100.9"]);
    w.stop();
  });
});

describe("followNode: only what the rules use, logged and applied", () => {
  test("a change of the derived addresses is applied; one that does not change them is not", async () => {
    const addresses = fakeAddresses();
    const feed = manualFeed();
    feed.push(stateWith(undefined));
    const w = await watchNode(feed, addresses.watch, new AbortController().signal, IPS);
    const applied: string[][] = [];
    const inCIDR = (ip: string) => ip.startsWith("192.0.2.");
    followNode(w, {
      backend: "test",
      log: silentLogger,
      derive: (f) => f.hostIPs.filter(inCIDR),
      apply: (now) => applied.push(now),
    });
    await addresses.set({ all: [...HOST.all, "203.0.113.5"], primary: HOST.primary });
    assert.deepEqual(applied, [], "an address outside the CIDR does not matter");
    const changesBefore = await addressChanges();
    await addresses.set({ all: [...HOST.all, "192.0.2.7"], primary: HOST.primary });
    await addresses.set(HOST);
    assert.equal(await addressChanges(), changesBefore + 2, "kpng_node_address_changes_total");
    assert.deepEqual(applied, [["192.0.2.10", "192.0.2.7"], ["192.0.2.10"]]);
    w.stop();
  });

  test("derive throwing keeps what is in use", async () => {
    const addresses = fakeAddresses();
    const feed = manualFeed();
    feed.push(stateWith(undefined));
    const w = await watchNode(feed, addresses.watch, new AbortController().signal, IPS);
    let applied = 0;
    followNode(w, {
      backend: "test",
      log: silentLogger,
      derive: (f) => {
        if (f.hostIPs.includes("192.0.2.99")) throw new Error("bad");
        return f.hostIPs;
      },
      apply: () => applied++,
    });
    await addresses.set({ all: [...HOST.all, "192.0.2.99"], primary: HOST.primary });
    assert.equal(applied, 0);
    w.stop();
  });
});

describe("the Node's podCIDRs (--detect-local-mode NodeCIDR)", () => {
  test("the first state's podCIDRs; a change is reported, an empty list keeps the rules", async () => {
    const feed = manualFeed();
    feed.push(stateWith(["192.0.2.10"], ["10.244.1.0/24", "fd00:10:244:1::/64"]));
    const w = await watchNode(feed, host, new AbortController().signal, POD_CIDRS);
    assert.deepEqual(w.current().podCIDRs, ["10.244.1.0/24", "fd00:10:244:1::/64"]);
    assert.deepEqual(w.current().primaryIPs, ["198.51.100.2"], "the Node's IPs are not followed");
    const seen = recorded(w);
    feed.push(stateWith(["192.0.2.99"], ["10.244.1.0/24", "fd00:10:244:1::/64"]));
    feed.push(stateWith(["192.0.2.99"], []));
    await settle();
    assert.equal(seen.length, 0, "an IP change or an emptied list is not a podCIDR change");
    feed.push(stateWith(["192.0.2.99"], ["10.244.7.0/24"]));
    await settle();
    assert.deepEqual(
      seen.map((f) => f.podCIDRs),
      [["10.244.7.0/24"]],
    );
    w.stop();
    assert.equal(feed.listeners, 0);
  });

  test("a Node without podCIDRs yet: none, and reported once it has some", async () => {
    const feed = manualFeed();
    feed.push(stateWith([], []));
    const w = await watchNode(feed, host, new AbortController().signal, POD_CIDRS);
    assert.deepEqual(w.current().podCIDRs, []);
    const seen = recorded(w);
    feed.push(stateWith([], ["10.244.3.0/24"]));
    await settle();
    assert.deepEqual(seen.at(-1)?.podCIDRs, ["10.244.3.0/24"]);
    w.stop();
  });

  test("a producer that does not carry them: none, and no listener kept", async () => {
    const feed = manualFeed();
    feed.push(stateWith(undefined, undefined));
    const w = await watchNode(feed, host, new AbortController().signal, POD_CIDRS);
    assert.deepEqual(w.current().podCIDRs, []);
    assert.equal(feed.listeners, 0);
  });
});

describe("rulesChanged: what an address change rewrites", () => {
  const facts = (hostIPs: readonly string[], primaryIPs: readonly string[]): NodeFacts => ({
    primaryIPs,
    primaryFrom: "host",
    podCIDRs: [],
    hostIPs,
  });
  const settings = (nodePortAddresses: string) => ({
    nodePortAddresses,
    clusterCIDRs: "",
    masqueradeAll: false,
  });
  const before = facts(["192.0.2.1"], ["192.0.2.1"]);
  const after = facts(["192.0.2.1", "192.0.2.7"], ["192.0.2.1", "192.0.2.7"]);

  test("NodePort CIDRs: an address inside one moves only the healthCheckNodePort listeners", () => {
    // Added to another interface than the default-route one: not a primary address.
    const now = rulesAddresses(settings("192.0.2.0/24"), facts(after.hostIPs, ["192.0.2.1"]));
    const was = rulesAddresses(settings("192.0.2.0/24"), before);
    assert.deepEqual(now.healthCheckAddresses, ["192.0.2.1", "192.0.2.7"]);
    assert.equal(rulesChanged(now, was), false);
  });

  test("primary: a new primary address is a new NodePort address, and the node's own address", () => {
    const was = rulesAddresses(settings("primary"), before);
    const now = rulesAddresses(settings("primary"), after);
    assert.deepEqual(now.nodePortCIDRs, ["192.0.2.1/32", "192.0.2.7/32"]);
    assert.equal(rulesChanged(now, was), true);
  });
});
