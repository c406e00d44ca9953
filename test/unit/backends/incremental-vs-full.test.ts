// A backend fed a long random sequence of local states, one change after another (the
// incremental path: only what each revision's change log names is looked at), must end with
// exactly the ruleset a fresh backend writes for the last state alone (the full path).

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { NftBackend } from "../../../src/backends/nft/backend.ts";
import { STALE_DELETE_DELAY_MS } from "../../../src/backends/nft/mirror.ts";
import { LocalStateTracker } from "../../../src/brain/local-state-tracker.ts";
import { ClusterStore } from "../../../src/brain/store.ts";
import type { EndpointSlice, Service } from "../../../src/model/kube.ts";
import type { LocalState } from "../../../src/model/local.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { FakeNft } from "../../support/fake-nft.ts";
import { seeded } from "../../support/seeded.ts";
import { ep, node, slice, svc } from "../brain/fixtures.ts";
import { V4, V6 } from "./nft/fixtures.ts";

const pick = <T>(random: () => number, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

/** One random Service among 12 names, with random type, policies, affinity and ports. */
function randomService(random: () => number, i: number): Service {
  const type = pick(random, ["ClusterIP", "NodePort", "LoadBalancer"] as const);
  const udp = random() < 0.3;
  return svc({
    name: `s${i}`,
    resourceVersion: String(Math.floor(random() * 1e6)),
    type,
    clusterIP: `198.51.100.${10 + i}`,
    clusterIPs: [`198.51.100.${10 + i}`],
    externalIPs: random() < 0.2 ? [`203.0.113.${10 + i}`] : [],
    loadBalancerIngress:
      type === "LoadBalancer" && random() < 0.7
        ? [{ ip: `203.0.113.${100 + i}`, hostname: "", ipMode: undefined }]
        : [],
    loadBalancerSourceRanges: type === "LoadBalancer" && random() < 0.3 ? ["192.0.2.0/24"] : [],
    sessionAffinity: random() < 0.2 ? "ClientIP" : "None",
    sessionAffinityTimeoutSeconds: 300,
    externalTrafficPolicy: random() < 0.3 ? "Local" : "Cluster",
    internalTrafficPolicy: random() < 0.2 ? "Local" : "Cluster",
    healthCheckNodePort: 0,
    ports: [
      {
        name: "http",
        protocol: udp ? "UDP" : "TCP",
        port: 80,
        nodePort: type === "ClusterIP" ? 0 : 30000 + i,
        targetPort: 8080,
      },
    ],
  });
}

/** Its slice: 0 to 4 endpoints from a small pool, on this node or another, some not ready. */
function randomSlice(random: () => number, i: number, protocol: "TCP" | "UDP"): EndpointSlice {
  const count = Math.floor(random() * 5);
  const ips = new Set<number>();
  for (let k = 0; k < count; k++) ips.add(1 + Math.floor(random() * 8));
  const endpoints = [...ips].map((n) =>
    ep(`192.0.2.${n}`, { node: random() < 0.3 ? "n1" : "n2", ready: random() < 0.85 }),
  );
  return slice(endpoints, {
    service: `s${i}`,
    resourceVersion: String(Math.floor(random() * 1e6)),
    ports: [{ name: "http", protocol, port: 8080 }],
  });
}

/**
 * The ruleset with each service port's endpoint list as a sorted set: the index an endpoint
 * takes in its list depends on history (endpoints keep their slots), and the pick is uniform.
 */
function normalized(dump: string): string {
  return dump
    .split("\n")
    .map((line) => {
      const m = /^(\s+map (?:nodeport-)?endpoints-\w+ .* = \{ )(.*)( \})$/.exec(line);
      if (m === null) return line;
      const lists = new Map<string, string[]>();
      for (const element of m[2]!.split(", ")) {
        const [key = "", value = ""] = element.split(" : ");
        const prefix = key.slice(0, key.lastIndexOf(" . "));
        lists.set(prefix, [...(lists.get(prefix) ?? []), value]);
      }
      const text = [...lists].map(([prefix, values]) => `${prefix} : [${values.sort().join(", ")}]`).sort();
      return `${m[1]}${text.join(", ")}${m[3]}`;
    })
    .join("\n");
}

function backendOn(nft: FakeNft, clock: { now: number }): NftBackend {
  return new NftBackend({ runner: nft, tables: [V4, V6], log: silentLogger, now: () => clock.now });
}

describe("incremental and full syncs agree", () => {
  for (const seed of [11, 12, 13, 14, 15, 16]) {
    it(`nft, random sequence ${seed}`, async () => {
      const random = seeded(seed);
      const store = new ClusterStore();
      store.upsert(node("n1"));
      store.synced();
      store.flush();
      const tracker = new LocalStateTracker(store, "n1");
      const clock = { now: 1_000_000 };
      const incremental = new FakeNft();
      const backend = backendOn(incremental, clock);
      let state: LocalState = tracker.update({
        services: new Set(),
        nodes: new Set(["n1"]),
        serviceCIDRs: true,
      });
      const revisions: number[] = [];
      for (let step = 0; step < 120; step++) {
        // A burst of 1 to 3 cluster changes, then one sync (states coalesce, as under load).
        const burst = 1 + Math.floor(random() * 3);
        for (let b = 0; b < burst; b++) {
          const i = Math.floor(random() * 12);
          const roll = random();
          if (roll < 0.15) store.delete("Service", `ns/s${i}`);
          else if (roll < 0.25) store.delete("EndpointSlice", `ns/s${i}-IPv4`);
          else if (roll < 0.55) store.upsert(randomService(random, i));
          else {
            const protocol = store.service(`ns/s${i}`)?.ports[0]?.protocol === "UDP" ? "UDP" : "TCP";
            store.upsert(randomSlice(random, i, protocol));
          }
          store.flush();
          state = tracker.update({ services: new Set([`ns/s${i}`]), nodes: new Set(), serviceCIDRs: false });
        }
        if (random() < 0.7) {
          await backend.sync(state);
          revisions.push(state.revision);
        }
        clock.now += Math.floor(random() * 800);
      }
      await backend.sync(state);
      // Past the delay, stale chains and sets are deleted: then both rulesets must be equal.
      clock.now += STALE_DELETE_DELAY_MS + 1;
      await backend.sync(state);
      const fresh = new FakeNft();
      await backendOn(fresh, clock).sync(state);
      assert.ok(new Set(revisions).size > 30, "the sequence made many distinct revisions");
      assert.ok(state.services.size > 0, "the final state has services");
      assert.equal(normalized(incremental.dump()), normalized(fresh.dump()));
    });
  }
});
