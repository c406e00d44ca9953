// The first full list of a source goes through the store and the trackers in one pass (store
// load, a tracker's first state). It must give exactly what delivering the same objects one by
// one, in any order and batching, gives: these random clusters compare the two, object for object.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LocalStateTracker } from "../../../src/brain/local-state-tracker.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import { FALLBACK_MANAGER, LABEL_FALLBACK_ACTIVE, LABEL_MANAGED_BY } from "../../../src/model/fallback.ts";
import {
  type EndpointPort,
  type EndpointSlice,
  type IPFamily,
  type KubeKind,
  type KubeObject,
  LABEL_HEADLESS,
  LABEL_SERVICE_PROXY_NAME,
  LABEL_ZONE,
  type Labels,
  type Node,
  objectKey,
  type Protocol,
  type Service,
  type ServiceCIDR,
  type ServiceType,
  type SliceEndpoint,
} from "../../../src/model/kube.ts";
import type { LocalService, LocalState } from "../../../src/model/local.ts";
import { seeded } from "../../support/seeded.ts";
import { node as nodeObject, slice as sliceObject, svc } from "./fixtures.ts";

/** Draws from a seeded generator, so a failing seed can be run again. */
function random(seed: number) {
  const next = seeded(seed);
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)] as T;
  const chance = (p: number) => next() < p;
  const shuffle = <T>(items: readonly T[]): T[] => {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = int(i + 1);
      [out[i], out[j]] = [out[j] as T, out[i] as T];
    }
    return out;
  };
  return { int, pick, chance, shuffle };
}

type Random = ReturnType<typeof random>;

const NODES = ["n1", "n2", "n3", "n4", "n5", "n6"];
const ZONES = ["z1", "z2", "z3"];
/** The nodes whose states are compared: with and without zone, one without a Node object. */
const WATCHED = ["n1", "n2", "n4", "n6", "ghost"];
const PORT_NAMES = ["http", "dns", "", "metrics"];
const PROTOCOLS: readonly Protocol[] = ["TCP", "UDP", "SCTP"];

function nodes(r: Random): Node[] {
  // n6 has no Node object at all (its endpoints name a node the store does not know).
  return NODES.slice(0, 5).map((name) => {
    const labels: Labels = r.chance(0.8) ? { [LABEL_ZONE]: r.pick(ZONES) } : {};
    const n = nodeObject(name, labels);
    return r.chance(0.15) ? { ...n, beingDeleted: true } : n;
  });
}

const v4 = (r: Random) => `10.${r.int(4)}.${r.int(4)}.${r.int(40)}`;
const v6 = (r: Random) => `2001:db8::${r.int(4).toString(16)}:${r.int(40).toString(16)}`;
const addressOf = (r: Random, family: IPFamily) => (family === "IPv4" ? v4(r) : v6(r));

function service(r: Random, i: number): Service {
  const name = `svc-${i}`;
  const namespace = r.pick(["default", "kube-system", "a"]);
  const type: ServiceType = r.pick(["ClusterIP", "ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]);
  const families: IPFamily[] = r.pick([["IPv4"], ["IPv6"], ["IPv4", "IPv6"], ["IPv6", "IPv4"]]);
  const headless = r.chance(0.08);
  const clusterIPs = headless
    ? ["None"]
    : families.map((f) => (f === "IPv4" ? `172.30.0.${i}` : `fd00::${i}`));
  const labels: Record<string, string> = {};
  if (r.chance(0.05)) labels[LABEL_SERVICE_PROXY_NAME] = "other-proxy";
  const portCount = 1 + r.int(3);
  const ports = Array.from({ length: portCount }, (_, p) => ({
    name: portCount === 1 && r.chance(0.3) ? "" : (PORT_NAMES[p] ?? `p${p}`),
    protocol: r.pick(PROTOCOLS),
    port: 80 + p,
    nodePort: type === "NodePort" || type === "LoadBalancer" ? 30000 + i * 4 + p : 0,
    targetPort: 8080 + p,
  }));
  const lbIngress =
    type === "LoadBalancer"
      ? families.map((f) => ({
          ip: addressOf(r, f),
          hostname: "",
          ipMode: r.pick(["VIP", "Proxy", undefined] as const),
        }))
      : [];
  return svc({
    name,
    namespace,
    labels,
    type,
    clusterIP: clusterIPs[0] ?? "",
    clusterIPs,
    ipFamilies: r.chance(0.1) ? [] : families,
    externalIPs: r.chance(0.2) ? [addressOf(r, r.pick(families))] : [],
    loadBalancerSourceRanges: r.chance(0.2) ? [" 192.0.2.0/24", "2001:db8:1::/64"] : [],
    loadBalancerIngress: lbIngress,
    sessionAffinity: r.chance(0.2) ? "ClientIP" : "None",
    sessionAffinityTimeoutSeconds: 10800,
    externalTrafficPolicy: r.chance(0.4) ? "Local" : "Cluster",
    internalTrafficPolicy: r.chance(0.25) ? "Local" : "Cluster",
    healthCheckNodePort: type === "LoadBalancer" ? 32000 + i : 0,
    ports,
  });
}

function endpoint(r: Random, family: IPFamily): SliceEndpoint {
  const hinted = r.chance(0.3);
  const state = r.pick([
    { ready: true, serving: true, terminating: false },
    { ready: null, serving: null, terminating: null },
    { ready: false, serving: true, terminating: true },
    { ready: false, serving: false, terminating: true },
    { ready: false, serving: false, terminating: false },
  ]);
  return {
    addresses: r.chance(0.03) ? [] : [addressOf(r, family)],
    conditions: state,
    hostname: "",
    nodeName: r.chance(0.1) ? "" : r.pick(NODES),
    zone: "",
    zoneHints: hinted ? [r.pick(ZONES)] : [],
    nodeHints: hinted && r.chance(0.5) ? [r.pick(NODES)] : [],
    podName: "",
  };
}

function slices(r: Random, s: Service): EndpointSlice[] {
  const out: EndpointSlice[] = [];
  const count = r.int(4);
  for (let k = 0; k < count; k++) {
    const family: IPFamily = r.pick(["IPv4", "IPv6"]);
    const ports: EndpointPort[] = s.ports.map((p) => ({
      name: r.chance(0.05) ? null : r.chance(0.1) ? "other" : p.name,
      protocol: p.protocol,
      port: r.chance(0.05) ? null : r.chance(0.3) ? 9000 + k : 8080,
    }));
    const labels: Record<string, string> = { "kubernetes.io/service-name": s.metadata.name };
    if (r.chance(0.05)) labels[LABEL_HEADLESS] = "";
    if (r.chance(0.05)) labels[LABEL_SERVICE_PROXY_NAME] = "other-proxy";
    if (r.chance(0.1)) {
      labels[LABEL_MANAGED_BY] = FALLBACK_MANAGER;
      labels[LABEL_FALLBACK_ACTIVE] = r.pick(["true", "false"]);
    }
    const base = sliceObject(
      Array.from({ length: r.int(8) }, () => endpoint(r, family)),
      {
        name: `${s.metadata.name}-${k}`,
        namespace: s.metadata.namespace,
        service: s.metadata.name,
        addressType: family,
        ports,
        labels,
      },
    );
    const annotations: Labels = r.chance(0.3)
      ? { "endpoints.kubernetes.io/last-change-trigger-time": `2026-01-0${1 + r.int(9)}T00:00:00Z` }
      : {};
    out.push({ ...base, metadata: { ...base.metadata, annotations } });
  }
  return out;
}

function serviceCIDR(name: string, cidrs: string[]): ServiceCIDR {
  return {
    kind: "ServiceCIDR",
    metadata: { namespace: "", name, uid: "", resourceVersion: "1", labels: {}, annotations: {} },
    cidrs,
  };
}

interface Cluster {
  readonly byKind: ReadonlyMap<KubeKind, readonly KubeObject[]>;
  /** Objects that the incremental path sees first and later deletes or replaces. */
  readonly transient: readonly KubeObject[];
}

function cluster(r: Random, size: number): Cluster {
  const services: Service[] = [];
  const endpointSlices: EndpointSlice[] = [];
  for (let i = 0; i < size; i++) {
    const s = service(r, i);
    // Some slices have no Service (yet), some Services no slices.
    if (r.chance(0.95)) services.push(s);
    endpointSlices.push(...slices(r, s));
  }
  const transient: KubeObject[] = [];
  for (let i = 0; i < size / 5; i++) {
    const s = service(r, size + i);
    transient.push(s, ...slices(r, s));
    // An earlier version of a kept object, replaced later.
    const kept = r.pick(services);
    if (kept !== undefined) transient.push({ ...kept, clusterIP: "172.31.0.1", clusterIPs: ["172.31.0.1"] });
  }
  const byKind = new Map<KubeKind, KubeObject[]>([
    ["Service", services],
    ["EndpointSlice", endpointSlices],
    ["Node", nodes(r)],
    [
      "ServiceCIDR",
      r.chance(0.5) ? [serviceCIDR("v4", ["172.30.0.0/16"]), serviceCIDR("v6", ["fd00::/64"])] : [],
    ],
  ]);
  return { byKind, transient };
}

const KINDS: readonly KubeKind[] = ["Service", "EndpointSlice", "Node", "ServiceCIDR"];

/** The first full list in one go, as the file source and a first relist deliver it. */
function bulk(c: Cluster): Map<string, LocalState> {
  const store = new ClusterStore();
  const trackers = WATCHED.map((name) => new LocalStateTracker(store, name));
  store.subscribe((change) => {
    for (const t of trackers) t.update(change);
  });
  for (const kind of KINDS) store.replace(kind, c.byKind.get(kind) ?? []);
  store.synced();
  store.flush();
  return new Map(trackers.map((t) => [t.nodeName, t.state]));
}

/** The same objects one at a time after sync, shuffled, in batches, with churn on the way. */
function incremental(r: Random, c: Cluster): Map<string, LocalState> {
  const store = new ClusterStore();
  // Half the nodes follow from the start; the others join at the end (seeded from a sibling).
  const early = WATCHED.filter((_, i) => i % 2 === 0).map((name) => new LocalStateTracker(store, name));
  store.subscribe((change) => {
    for (const t of early) t.update(change);
  });
  store.synced();
  store.flush();
  const final = [...KINDS.flatMap((kind) => c.byKind.get(kind) ?? [])];
  const steps: ({ upsert: KubeObject } | { remove: KubeObject })[] = [];
  for (const o of r.shuffle([...c.transient, ...final])) steps.push({ upsert: o });
  // Transient objects are removed (or, for a replaced one, written again) after they appeared.
  for (const o of c.transient) steps.push({ remove: o });
  for (const o of r.shuffle(final)) if (r.chance(0.3)) steps.push({ upsert: o });
  const finalKeys = new Set(final.map((o) => `${o.kind} ${objectKey(o.metadata)}`));
  const finalByKey = new Map(final.map((o) => [`${o.kind} ${objectKey(o.metadata)}`, o]));
  for (const step of steps) {
    if ("upsert" in step) store.upsert(step.upsert);
    else {
      const key = `${step.remove.kind} ${objectKey(step.remove.metadata)}`;
      const kept = finalByKey.get(key);
      if (kept !== undefined) store.upsert(kept);
      else if (!finalKeys.has(key)) store.delete(step.remove.kind, objectKey(step.remove.metadata));
    }
    if (r.chance(0.2)) store.flush();
  }
  store.flush();
  const late = WATCHED.filter((_, i) => i % 2 === 1).map((name) => new LocalStateTracker(store, name));
  for (const t of late) t.update({ services: new Set(), nodes: new Set([t.nodeName]), serviceCIDRs: true });
  return new Map([...early, ...late].map((t) => [t.nodeName, t.state]));
}

/**
 * A service without endpointsChangedAt: the trigger time of the change that last altered what
 * the node programs, which depends on the history of changes (a later annotation on slices that
 * program the same keeps the earlier object), and which a first list has none of.
 */
function programmed(service: LocalService | undefined): Omit<LocalService, "endpointsChangedAt"> | undefined {
  if (service === undefined) return undefined;
  const { endpointsChangedAt: _, ...rest } = service;
  return rest;
}

function assertSameStates(
  seed: number,
  a: ReadonlyMap<string, LocalState>,
  b: ReadonlyMap<string, LocalState>,
) {
  for (const name of WATCHED) {
    const x = a.get(name);
    const y = b.get(name);
    assert.ok(x !== undefined && y !== undefined);
    const where = `seed ${seed}, node ${name}`;
    assert.deepEqual([...x.services.keys()].sort(), [...y.services.keys()].sort(), `${where}: service keys`);
    for (const [key, service] of x.services)
      assert.deepEqual(programmed(service), programmed(y.services.get(key)), `${where}: ${key}`);
    assert.deepEqual(x.serviceCIDRs, y.serviceCIDRs, `${where}: service CIDRs`);
    assert.equal(x.nodeEligible, y.nodeEligible, `${where}: eligibility`);
  }
}

describe("the first full list in one pass gives what the objects one by one give", () => {
  for (let seed = 1; seed <= 12; seed++) {
    it(`random cluster, seed ${seed}`, () => {
      const r = random(seed);
      const c = cluster(r, 40 + r.int(40));
      const a = bulk(c);
      const b = incremental(r, c);
      assertSameStates(seed, a, b);
      // Not vacuous: the clusters program something on most nodes.
      assert.ok(
        [...a.values()].some((s) => s.services.size > 10),
        `seed ${seed}: too few services`,
      );
    });
  }

  it("a relist after sync (not a first list) still replaces, deletes and reports", () => {
    const r = random(99);
    const c = cluster(r, 30);
    const store = new ClusterStore();
    const tracker = new LocalStateTracker(store, "n1");
    store.subscribe((change) => tracker.update(change));
    for (const kind of KINDS) store.replace(kind, c.byKind.get(kind) ?? []);
    store.synced();
    store.flush();
    const before = tracker.state;
    store.replace("Service", []);
    store.flush();
    assert.equal(tracker.state.services.size, 0);
    assert.equal(tracker.state.revision, before.revision + 1);
  });
});
