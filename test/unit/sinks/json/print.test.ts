import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ClusterChange, ClusterView } from "../../../../src/model/global.ts";
import type { EndpointSlice, Node, Service, ServiceCIDR } from "../../../../src/model/kube.ts";
import type { LocalState, LocalStateFeed } from "../../../../src/model/local.ts";
import { printGlobalStates } from "../../../../src/sinks/json/print-global.ts";
import { printLocalStates } from "../../../../src/sinks/json/print-local.ts";
import { settle } from "../../../support/settle.ts";

/** A feed the test pushes states into. */
class ManualFeed implements LocalStateFeed {
  listener: ((s: LocalState) => void | Promise<void>) | undefined;
  unsubscribed = false;
  subscribe(listener: (s: LocalState) => void | Promise<void>): () => void {
    this.listener = listener;
    return () => {
      this.unsubscribed = true;
    };
  }
  async push(revision: number): Promise<void> {
    await this.listener?.({ node: "n", revision, services: new Map(), serviceCIDRs: { IPv4: [], IPv6: [] } });
  }
}

const collector = () => {
  const written: string[] = [];
  return { written, write: async (text: string) => void written.push(text) };
};

describe("printLocalStates", () => {
  test("with --once, prints the first state as one JSON document and finishes", async () => {
    const feed = new ManualFeed();
    const out = collector();
    const done = printLocalStates(feed, {
      once: true,
      write: out.write,
      signal: new AbortController().signal,
    });
    await feed.push(1);
    await done;
    assert.equal(out.written.length, 1);
    assert.deepEqual(JSON.parse(out.written[0]!), { node: "n", revision: 1, serviceCIDRs: [], services: [] });
    assert.ok(out.written[0]!.endsWith("}\n"), "a document ends with a newline");
    assert.ok(feed.unsubscribed);
  });

  test("without --once, prints each state until the signal aborts", async () => {
    const feed = new ManualFeed();
    const out = collector();
    const abort = new AbortController();
    const done = printLocalStates(feed, { once: false, write: out.write, signal: abort.signal });
    await feed.push(1);
    await feed.push(2);
    abort.abort();
    await done;
    assert.deepEqual(
      out.written.map((t) => JSON.parse(t).revision),
      [1, 2],
    );
    assert.ok(feed.unsubscribed);
  });

  test("a failed write (stdout closed) ends the sink with the error", async () => {
    const feed = new ManualFeed();
    const done = printLocalStates(feed, {
      once: false,
      write: async () => {
        throw new Error("EPIPE");
      },
      signal: new AbortController().signal,
    });
    await feed.push(1);
    await assert.rejects(done, /EPIPE/);
  });
});

/** A store the test changes by hand. */
class ManualStore implements Pick<ClusterView, "isSynced" | "subscribe" | "services" | "slices" | "nodes"> {
  isSynced = false;
  nodeNames: string[] = [];
  listener: ((c: ClusterChange) => void) | undefined;
  subscribe(listener: (c: ClusterChange) => void): () => void {
    this.listener = listener;
    return () => {
      this.listener = undefined;
    };
  }
  services(): Iterable<Service> {
    return [];
  }
  slices(): Iterable<EndpointSlice> {
    return [];
  }
  serviceCIDRObjects(): Iterable<ServiceCIDR> {
    return [];
  }
  nodes(): Iterable<Node> {
    return this.nodeNames.map(
      (name) =>
        ({
          kind: "Node",
          metadata: { namespace: "", name, uid: "", resourceVersion: "", labels: {}, annotations: {} },
          addresses: [],
          podCIDRs: [],
        }) satisfies Node,
    );
  }
  change(): void {
    this.listener?.({ services: new Set(), nodes: new Set(), serviceCIDRs: false });
  }
}

describe("printGlobalStates", () => {
  test("prints nothing before the store has synced, then the sorted model", async () => {
    const store = new ManualStore();
    const out = collector();
    const done = printGlobalStates(store, {
      once: true,
      write: out.write,
      signal: new AbortController().signal,
    });
    store.nodeNames = ["b", "a"];
    store.change();
    await settle();
    assert.equal(out.written.length, 0, "not synced yet");
    store.isSynced = true;
    store.change();
    await done;
    const doc = JSON.parse(out.written[0]!);
    assert.deepEqual(Object.keys(doc), ["services", "endpointSlices", "nodes", "serviceCIDRs"]);
    assert.deepEqual(
      doc.nodes.map((n: Node) => n.metadata.name),
      ["a", "b"],
    );
    assert.deepEqual(Object.keys(doc.nodes[0]), ["addresses", "kind", "metadata", "podCIDRs"], "keys sorted");
  });

  test("a store synced before the sink starts is printed at once, and an unchanged state is not printed again", async () => {
    const store = new ManualStore();
    store.isSynced = true;
    store.nodeNames = ["a"];
    const out = collector();
    const abort = new AbortController();
    const done = printGlobalStates(store, { once: false, write: out.write, signal: abort.signal });
    store.change(); // the store's own sync notification, after we printed
    store.nodeNames = ["a", "b"];
    store.change();
    await settle();
    abort.abort();
    await done;
    assert.deepEqual(
      out.written.map((t) => JSON.parse(t).nodes.length),
      [1, 2],
    );
  });
});
