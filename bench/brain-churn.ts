// Brain benchmark: initial computation for clusters of 1k and 10k services, then a churn of
// cluster events, mostly irrelevant to this node, replayed through ClusterStore and
// LocalStateTracker. Reports how many events became revisions and what each event cost, and the
// cost of one relevant change (an EndpointSlice change that alters this node's state): p50/p99,
// which should stay flat from 1k to 100k services.
//
//   ./node_modules/.bin/node --expose-gc bench/brain-churn.ts [--events N] [--sizes=1000,100000] [--quick]

import { LocalStateTracker } from "../src/brain/local-state-tracker.ts";
import { ClusterStore } from "../src/brain/store.ts";
import type { EndpointSlice, Node, Service } from "../src/model/kube.ts";
import { parseEndpointSlice, parseNode, parseService } from "../src/model/validate.ts";
import { ip4, must, policyOf, rawNode, rawService } from "./lib/brain-cluster.ts";
import { quantile } from "./lib/nft-netns.ts";
import { sizesFlag, table } from "./lib/table.ts";

const NODES = 100;
const ENDPOINTS_PER_SERVICE = 10;
const THIS_NODE = "node-0";
const eventsArg = process.argv.indexOf("--events");
const quick = process.argv.includes("--quick");
const EVENTS = eventsArg > 0 ? Number(process.argv[eventsArg + 1]) : quick ? 4000 : 20000;
const SIZES = sizesFlag([1000, 10_000]);

/** A deterministic generator, so two runs replay the same churn. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Endpoints of service i spread over the nodes; `extra` adds endpoints on far-away nodes. */
function rawSlice(i: number, version: number, extra = 0, annotations: Record<string, string> = {}): unknown {
  const endpoints = [];
  for (let e = 0; e < ENDPOINTS_PER_SERVICE + extra; e++) {
    endpoints.push({
      addresses: [ip4(100, i * 16 + e)],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: `node-${e < ENDPOINTS_PER_SERVICE ? (i + e * 7) % NODES : 1 + ((i + e) % (NODES - 1))}`,
    });
  }
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `svc-${i}-abcde`,
      namespace: `ns-${i % 50}`,
      resourceVersion: String(version),
      labels: { "kubernetes.io/service-name": `svc-${i}` },
      annotations,
    },
    addressType: "IPv4",
    ports: [{ name: "http", protocol: "TCP", port: 8080 }],
    endpoints,
  };
}

function heapMiB(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

type Kind =
  | "other-node endpoint (iTP Local)"
  | "label/annotation only"
  | "identical resync"
  | "other node relabelled"
  | "relevant endpoint change";

interface Row {
  services: number;
  parseMs: number;
  initialMs: number;
  heapMiB: number;
  events: number;
  revisions: number;
  churnMs: number;
  byKind: Map<Kind, { events: number; revisions: number; ms: number }>;
  /** Each relevant endpoint change's cost, ms. */
  relevantMs: number[];
}

function run(services: number): Row {
  const heapBefore = heapMiB();
  const t0 = performance.now();
  const nodes: Node[] = [];
  for (let n = 0; n < NODES; n++) nodes.push(must(parseNode(rawNode(n))));
  const svcs: Service[] = [];
  const slices: EndpointSlice[] = [];
  for (let i = 0; i < services; i++) {
    svcs.push(must(parseService(rawService(i))));
    slices.push(must(parseEndpointSlice(rawSlice(i, 1))));
  }
  const parseMs = performance.now() - t0;

  const store = new ClusterStore();
  const tracker = new LocalStateTracker(store, THIS_NODE);
  store.subscribe((change) => tracker.update(change));
  const t1 = performance.now();
  for (const o of [...nodes, ...svcs, ...slices]) store.upsert(o);
  store.synced();
  store.flush();
  const initialMs = performance.now() - t1;
  if (tracker.state.services.size !== services) throw new Error("not every service was computed");
  const heap = heapMiB() - heapBefore;

  const random = rng(42 + services);
  const itpLocal = [...Array(services).keys()].filter((i) => policyOf(i) === "itp-local");
  const clusterPolicy = [...Array(services).keys()].filter((i) => policyOf(i) === "cluster");
  const pick = (list: number[]) => list[Math.floor(random() * list.length)] ?? 0;
  const versions = new Map<number, number>();
  const nextVersion = (i: number) => {
    const v = (versions.get(i) ?? 1) + 1;
    versions.set(i, v);
    return v;
  };
  const extras = new Map<number, number>();

  const byKind = new Map<Kind, { events: number; revisions: number; ms: number }>();
  const relevantMs: number[] = [];
  let churnMs = 0;
  for (let e = 0; e < EVENTS; e++) {
    const r = random();
    let kind: Kind;
    let event: () => void;
    if (r < 0.4) {
      kind = "other-node endpoint (iTP Local)";
      const i = pick(itpLocal);
      const extra = ((extras.get(i) ?? 0) + 1) % 3;
      extras.set(i, extra);
      const s = must(parseEndpointSlice(rawSlice(i, nextVersion(i), extra)));
      event = () => store.upsert(s);
    } else if (r < 0.65) {
      kind = "label/annotation only";
      const i = Math.floor(random() * services);
      const o =
        random() < 0.5
          ? must(parseService(rawService(i, { rev: String(e) })))
          : must(parseEndpointSlice(rawSlice(i, nextVersion(i), extras.get(i) ?? 0, { touched: String(e) })));
      event = () => store.upsert(o);
    } else if (r < 0.9) {
      kind = "identical resync";
      const i = Math.floor(random() * services);
      const key = `ns-${i % 50}/svc-${i}`;
      // A copy, as a relist delivers: equal by value, not by identity.
      const o = structuredClone(random() < 0.5 ? store.service(key) : store.slicesOf(key)[0]);
      event = () => {
        if (o !== undefined) store.upsert(o);
      };
    } else if (r < 0.97) {
      kind = "other node relabelled";
      const n = 1 + Math.floor(random() * (NODES - 1));
      const o = must(parseNode(rawNode(n, { rev: String(e) })));
      event = () => store.upsert(o);
    } else {
      kind = "relevant endpoint change";
      const i = pick(clusterPolicy);
      const extra = ((extras.get(i) ?? 0) + 1) % 3;
      extras.set(i, extra);
      const s = must(parseEndpointSlice(rawSlice(i, nextVersion(i), extra)));
      event = () => store.upsert(s);
    }
    const before = tracker.state.revision;
    const start = performance.now();
    event();
    store.flush();
    const ms = performance.now() - start;
    churnMs += ms;
    if (kind === "relevant endpoint change") relevantMs.push(ms);
    const k = byKind.get(kind) ?? { events: 0, revisions: 0, ms: 0 };
    k.events++;
    k.revisions += tracker.state.revision - before;
    k.ms += ms;
    byKind.set(kind, k);
  }
  const revisions = [...byKind.values()].reduce((a, k) => a + k.revisions, 0);
  return {
    services,
    parseMs,
    initialMs,
    heapMiB: heap,
    events: EVENTS,
    revisions,
    churnMs,
    byKind,
    relevantMs,
  };
}

const results = SIZES.map(run);
console.log(
  `brain churn: ${NODES} nodes, ${ENDPOINTS_PER_SERVICE} endpoints per service, ${EVENTS} events, node ${THIS_NODE}, gc ${"gc" in globalThis ? "on" : "off (use --expose-gc)"}\n`,
);
console.log(
  table(
    [
      "services",
      "validate ms",
      "initial ms",
      "heap MiB",
      "events in",
      "revisions out",
      "ratio",
      "µs/event",
      "churn total ms",
    ],
    results.map((r) => [
      String(r.services),
      r.parseMs.toFixed(0),
      r.initialMs.toFixed(0),
      r.heapMiB.toFixed(1),
      String(r.events),
      String(r.revisions),
      `${((100 * r.revisions) / r.events).toFixed(1)}%`,
      ((1000 * r.churnMs) / r.events).toFixed(1),
      r.churnMs.toFixed(0),
    ]),
  ),
);
for (const r of results) {
  console.log(`\nper kind of event, ${r.services} services:`);
  console.log(
    table(
      ["event", "events", "revisions", "µs/event"],
      [...r.byKind].map(([kind, k]) => [
        kind,
        String(k.events),
        String(k.revisions),
        ((1000 * k.ms) / k.events).toFixed(1),
      ]),
    ),
  );
}

console.log("\none relevant change (EndpointSlice change for this node) through store + tracker:");
console.log(
  table(
    ["services", "changes", "p50 µs", "p99 µs"],
    results.map((r) => [
      String(r.services),
      String(r.relevantMs.length),
      (1000 * quantile(r.relevantMs, 0.5)).toFixed(1),
      (1000 * quantile(r.relevantMs, 0.99)).toFixed(1),
    ]),
  ),
);
const smallest = results[0];
const largest = results[results.length - 1];
if (smallest !== undefined && largest !== undefined && largest !== smallest) {
  const ratio = quantile(largest.relevantMs, 0.5) / quantile(smallest.relevantMs, 0.5);
  console.log(
    `p50 at ${largest.services} / p50 at ${smallest.services}: ${ratio.toFixed(2)}x (target: flat within 20%)`,
  );
}
