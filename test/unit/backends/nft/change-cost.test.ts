// One endpoint change through everything a node runs in one process: the store, the tracker and
// its feed, the nft backend's sync loop and mirror, the sync metrics, the node services
// (healthCheckNodePorts, conntrack). After the first state no step may walk the Services (of
// the store or of a local state), so that a change costs the same at 100k Services as at 1k.
// The views below count the walks; a walk added anywhere on the path fails this test.

import assert from "node:assert/strict";
import { test } from "node:test";
import { NftBackend } from "../../../../src/backends/nft/backend.ts";
import type { NftRunner } from "../../../../src/backends/nft/runner.ts";
import { localStateFeed } from "../../../../src/brain/local-state-feed.ts";
import { ClusterStore } from "../../../../src/brain/store.ts";
import type { ClusterChange, ClusterView } from "../../../../src/model/global.ts";
import type { EndpointSlice, Node, Service, ServiceCIDR } from "../../../../src/model/kube.ts";
import type { LocalState, LocalStateFeed } from "../../../../src/model/local.ts";
import { NodeServices } from "../../../../src/node/node-services.ts";
import { parseNodeServicesOptions } from "../../../../src/node/options.ts";
import { silentLogger } from "../../../../src/observability/log.ts";
import { CountingServices, type ServiceReads } from "../../../support/counting-services.ts";
import { ep, slice, svc } from "../../brain/fixtures.ts";
import { V4 } from "./fixtures.ts";

const SERVICES = 2000;
const CHANGES = 20;

/** Walks of every service (or slice, or node) of the store, by any consumer. */
class CountingView implements ClusterView {
  walks = 0;
  readonly #store: ClusterStore;
  constructor(store: ClusterStore) {
    this.#store = store;
  }
  get isSynced(): boolean {
    return this.#store.isSynced;
  }
  subscribe(listener: (change: ClusterChange) => void): () => void {
    return this.#store.subscribe(listener);
  }
  service(key: string): Service | undefined {
    return this.#store.service(key);
  }
  slicesOf(serviceKey: string): readonly EndpointSlice[] {
    return this.#store.slicesOf(serviceKey);
  }
  node(name: string): Node | undefined {
    return this.#store.node(name);
  }
  services(): Iterable<Service> {
    this.walks++;
    return this.#store.services();
  }
  serviceKeys(): Iterable<string> {
    this.walks++;
    return this.#store.serviceKeys();
  }
  slices(): Iterable<EndpointSlice> {
    this.walks++;
    return this.#store.slices();
  }
  nodes(): Iterable<Node> {
    this.walks++;
    return this.#store.nodes();
  }
  serviceCIDRObjects(): Iterable<ServiceCIDR> {
    return this.#store.serviceCIDRObjects();
  }
  serviceCIDRs(): readonly string[] {
    return this.#store.serviceCIDRs();
  }
}

/** The feed with each state's services counted; one wrapper per map, so identity still means unchanged. */
function countingFeed(feed: LocalStateFeed, counts: ServiceReads): LocalStateFeed {
  const wrapped = new WeakMap<object, CountingServices>();
  const counted = (state: LocalState): LocalState => {
    let services = wrapped.get(state.services);
    if (services === undefined) {
      services = new CountingServices(state.services, counts);
      wrapped.set(state.services, services);
    }
    return { ...state, services };
  };
  return {
    subscribe: (listener) => feed.subscribe((state) => listener(counted(state))),
    programmed: (state, families) => feed.programmed?.(state, families),
  };
}

/** Accepts every transaction; keeps the last one. */
class AcceptingNft implements NftRunner {
  runs = 0;
  last = "";
  async run(text: string): Promise<void> {
    this.runs++;
    this.last = text;
  }
  async check(): Promise<void> {}
  async list(): Promise<Buffer | undefined> {
    return undefined;
  }
}

const endpointsOf = (i: number, moved: number) =>
  [0, 1, 2].map((e) => ep(e === 0 && moved > 0 ? `10.1.${moved}.${i % 250}` : `10.0.${i % 250}.${e + 1}`));

function serviceOf(i: number): Service {
  return svc({
    name: `svc-${i}`,
    clusterIP: `10.96.${i >> 8}.${i & 255}`,
    clusterIPs: [`10.96.${i >> 8}.${i & 255}`],
    ports: [
      { name: "http", protocol: "TCP", port: 80, targetPort: 8080 },
      { name: "dns", protocol: "UDP", port: 53, targetPort: 8053 },
    ],
  });
}

function sliceOf(i: number, moved = 0): EndpointSlice {
  return slice(endpointsOf(i, moved), {
    name: `svc-${i}-a`,
    service: `svc-${i}`,
    ports: [
      { name: "http", protocol: "TCP", port: 8080 },
      { name: "dns", protocol: "UDP", port: 8053 },
    ],
  });
}

test("one endpoint change walks no Services anywhere on the path from the store to the rules", async () => {
  const store = new ClusterStore();
  store.replace(
    "Service",
    Array.from({ length: SERVICES }, (_, i) => serviceOf(i)),
  );
  store.replace(
    "EndpointSlice",
    Array.from({ length: SERVICES }, (_, i) => sliceOf(i)),
  );
  const view = new CountingView(store);
  const counts: ServiceReads = { walks: 0, lookups: 0 };
  const nft = new AcceptingNft();
  const conntrack = { batches: 0 };
  const node = await NodeServices.start(
    parseNodeServicesOptions({ healthzBindAddress: "", metricsBindAddress: "" }),
    {
      mode: "nftables",
      families: ["IPv4"],
      syncPeriodMs: 30_000,
      healthCheckAddresses: [],
      log: silentLogger,
      sysctlFiles: { read: async () => "0", write: async () => {} },
      conntrackRunner: {
        list: async () => {},
        deleteBatch: async (lines) => {
          conntrack.batches++;
          return lines.length;
        },
      },
    },
  );
  const backend = new NftBackend({
    runner: nft,
    tables: [V4],
    log: silentLogger,
    observer: node,
  });
  const applied: LocalState[] = [];
  const feed = localStateFeed(view, "n1");
  const watched: LocalStateFeed = {
    subscribe: (listener) =>
      feed.subscribe(async (state) => {
        await listener(state);
        applied.push(state);
      }),
  };
  const stop = new AbortController();
  const running = backend.run(countingFeed(watched, counts), stop.signal);
  const appliedAfter = async (n: number) => {
    for (let i = 0; i < 10_000 && applied.length < n; i++) await new Promise((r) => setImmediate(r));
    assert.ok(applied.length >= n, `state ${n} was never applied`);
  };
  try {
    store.synced();
    await appliedAfter(1);
    await node.healthCheckNodePorts.update(applied[0] as LocalState);
    assert.ok(counts.walks > 0, "the first state is walked, as it should be");
    const before = { view: view.walks, walks: counts.walks, lookups: counts.lookups, runs: nft.runs };
    for (let k = 1; k <= CHANGES; k++) {
      store.upsert(sliceOf((k * 97) % SERVICES, k));
      await appliedAfter(k + 1);
    }
    assert.equal(nft.runs - before.runs, CHANGES, "one transaction per change");
    assert.match(nft.last, /10\.1\.20\./, "the last change reached the rules");
    assert.equal(view.walks - before.view, 0, "walks of the store after the first state");
    assert.equal(counts.walks - before.walks, 0, "walks of a local state's services after the first");
    // Each consumer looks up the changed Service a few times; 2,000 Services would be 2,000.
    assert.ok(
      counts.lookups - before.lookups <= CHANGES * 20,
      `${counts.lookups - before.lookups} lookups for ${CHANGES} changes`,
    );
    assert.ok(conntrack.batches > 0, "the moved UDP endpoints' flows were cleaned up");
  } finally {
    stop.abort();
    await running;
    await node.close();
  }
});
