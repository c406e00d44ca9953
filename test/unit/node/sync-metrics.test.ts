import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { stateChanges } from "../../../src/node/state-changes.ts";
import { SyncMetrics } from "../../../src/node/sync-metrics.ts";
import { registry } from "../../../src/observability/metrics.ts";
import { countedState } from "../../support/counting-services.ts";
import { ep, port, service, state } from "../backends/nft/fixtures.ts";

async function values(name: string) {
  return (await registry.getMetricsAsJSON()).find((x) => x.name === name)?.values ?? [];
}

describe("stateChanges", () => {
  const a = service({ name: "a" });
  const b = service({ name: "b" });
  test("added, removed, endpoints changed, service fields changed", () => {
    assert.deepEqual(stateChanges(undefined, state([a, b])), { services: 2, endpoints: 2 });
    assert.deepEqual(stateChanges(state([a, b]), state([a])), { services: 1, endpoints: 1 });
    const a2 = service({
      name: "a",
      ports: [port({ internalEndpoints: [ep("198.51.100.9")] })],
    });
    assert.deepEqual(stateChanges(state([a]), state([a2])), { services: 0, endpoints: 1 });
    const a3 = service({ name: "a", clusterIPs: ["203.0.113.99"] });
    assert.deepEqual(stateChanges(state([a]), state([a3])), { services: 1, endpoints: 0 });
    assert.deepEqual(stateChanges(state([a]), state([a])), { services: 0, endpoints: 0 });
  });
});

describe("SyncMetrics (kube-proxy names)", () => {
  test("sync durations by kind, timestamps, network programming latency, failures", async () => {
    let now = Date.parse("2026-01-01T00:00:00Z");
    const m = new SyncMetrics("nftables", ["IPv4"], () => now);
    const s = service({ name: "np", endpointsChangedAt: now + 1000 });
    now += 3000;
    const st = state([s]);
    m.queued(st);
    m.synced("IPv4", { state: st, full: true, durationMs: 20 });
    m.synced("IPv4", { state: st, full: false, durationMs: 5 });
    m.failed("IPv4");
    const count = async (name: string) =>
      (await values(name)).find((v) => (v as { metricName?: string }).metricName === `${name}_count`)?.value;
    assert.equal(await count("kubeproxy_sync_proxy_rules_duration_seconds"), 2);
    assert.equal(await count("kubeproxy_sync_full_proxy_rules_duration_seconds"), 1);
    assert.equal(await count("kubeproxy_sync_partial_proxy_rules_duration_seconds"), 1);
    assert.equal(
      await count("kubeproxy_network_programming_duration_seconds"),
      1,
      "observed once per change",
    );
    const sum = (await values("kubeproxy_network_programming_duration_seconds")).find((v) =>
      (v as { metricName?: string }).metricName?.endsWith("_sum"),
    );
    assert.equal(sum?.value, 2);
    assert.equal((await values("kubeproxy_sync_proxy_rules_last_timestamp_seconds"))[0]?.value, now / 1000);
    assert.equal(
      (await values("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds"))[0]?.value,
      now / 1000,
    );
    assert.equal((await values("kubeproxy_sync_proxy_rules_nftables_sync_failures_total"))[0]?.value, 1);
    assert.equal((await values("kubeproxy_sync_proxy_rules_service_changes_total"))[0]?.value, 1);
    // One metric family for every backend, told apart by a label.
    assert.equal(
      (await values("kubeproxy_sync_proxy_rules_duration_seconds"))[0]?.labels.backend,
      "nftables",
    );
  });

  test("a companion's failures count under its own kind's name, told apart by the backend label", async () => {
    const m = new SyncMetrics("ebpf-nftables", ["IPv4"], Date.now, "nftables");
    m.failed("IPv4");
    const companion = (await values("kubeproxy_sync_proxy_rules_nftables_sync_failures_total")).find(
      (v) => v.labels.backend === "ebpf-nftables",
    );
    assert.equal(companion?.value, 1);
    assert.equal(registry.getSingleMetric("kpng_ebpf_nftables_sync_failures_total"), undefined);
  });

  test("changes pending: what arrived since the last sync, each service once, zero once synced", async () => {
    const m = new SyncMetrics("pending-test", ["IPv4"]);
    const pending = async (name: string) =>
      (await values(`kubeproxy_sync_proxy_rules_${name}_changes_pending`)).find(
        (v) => v.labels.backend === "pending-test",
      )?.value;
    assert.equal(await pending("service"), 0, "exists at zero from the start");
    assert.equal(await pending("endpoint"), 0);
    const a = service({ name: "a" });
    const b = service({ name: "b" });
    const s1 = state([a, b]);
    m.queued(s1);
    assert.equal(await pending("service"), 2);
    assert.equal(await pending("endpoint"), 2);
    m.synced("IPv4", { state: s1, full: true, durationMs: 1 });
    assert.equal(await pending("service"), 0);
    assert.equal(await pending("endpoint"), 0);
    // Two states before the next sync change a's endpoints twice: one service pending.
    const a2 = service({
      name: "a",
      ports: [port({ internalEndpoints: [ep("198.51.100.9")] })],
    });
    const a3 = service({
      name: "a",
      ports: [port({ internalEndpoints: [ep("198.51.100.10")] })],
    });
    m.queued(state([a2, b], 2));
    const s3 = state([a3, b], 3);
    m.queued(s3);
    assert.equal(await pending("endpoint"), 1);
    assert.equal(await pending("service"), 0);
    m.failed("IPv4");
    assert.equal(await pending("endpoint"), 1, "a failed sync leaves them pending");
    m.synced("IPv4", { state: s3, full: false, durationMs: 1 });
    assert.equal(await pending("endpoint"), 0);
  });

  test("ip_family: each family's series counts its own services and its own sync", async () => {
    const m = new SyncMetrics("family-test", ["IPv4", "IPv6"]);
    const series = async (name: string, family: string) =>
      (await values(name)).find(
        (v) =>
          v.labels.backend === "family-test" &&
          v.labels.ip_family === family &&
          (v as { metricName?: string }).metricName !== `${name}_bucket`,
      )?.value;
    const v4 = service({ name: "v4", clusterIPs: ["203.0.113.1"] });
    const v6 = service({ name: "v6", clusterIPs: ["2001:db8::1"] });
    const dual = service({ name: "dual", clusterIPs: ["203.0.113.2", "2001:db8::2"] });
    const local = service({ name: "local6", clusterIPs: ["2001:db8::3"], internalTrafficPolicy: "Local" });
    const s1 = state([v4, v6, dual, local]);
    m.queued(s1);
    assert.equal(await series("kubeproxy_sync_proxy_rules_service_changes_pending", "IPv4"), 2);
    assert.equal(await series("kubeproxy_sync_proxy_rules_service_changes_pending", "IPv6"), 3);
    m.synced("IPv4", { state: s1, full: true, durationMs: 10 });
    m.failed("IPv6");
    assert.equal(await series("kubeproxy_sync_proxy_rules_service_changes_pending", "IPv4"), 0);
    assert.equal(
      await series("kubeproxy_sync_proxy_rules_service_changes_pending", "IPv6"),
      3,
      "not synced yet",
    );
    assert.equal(await series("kubeproxy_sync_proxy_rules_nftables_sync_failures_total", "IPv6"), undefined);
    assert.equal(await series("kpng_family_test_sync_failures_total", "IPv6"), 1);
    assert.equal(await series("kpng_family_test_sync_failures_total", "IPv4"), 0);
    m.synced("IPv6", { state: s1, full: true, durationMs: 30 });
    const sum = async (family: string) =>
      (await values("kubeproxy_sync_proxy_rules_duration_seconds")).find(
        (v) =>
          v.labels.backend === "family-test" &&
          v.labels.ip_family === family &&
          (v as { metricName?: string }).metricName?.endsWith("_sum"),
      )?.value;
    assert.equal(await sum("IPv4"), 0.01, "each family's own duration");
    assert.equal(await sum("IPv6"), 0.03);
    const noLocal = async (family: string) =>
      (await values("kubeproxy_sync_proxy_rules_no_local_endpoints_total")).find(
        (v) =>
          v.labels.backend === "family-test" &&
          v.labels.ip_family === family &&
          v.labels.traffic_policy === "internal",
      )?.value;
    assert.equal(await noLocal("IPv4"), 0);
    assert.equal(await noLocal("IPv6"), 1);
  });
});

// Last: the tests above read the first series of a metric, and this one adds series of its own.
describe("SyncMetrics at a cold start", () => {
  test("the first state (every Service at a cold start) is walked once, for its queueing and its sync", () => {
    // A mode of its own: the registry is the process's, and other tests count nftables' series.
    const m = new SyncMetrics("walks", ["IPv4"]);
    const reads = { walks: 0, lookups: 0 };
    const first = countedState(state([service({ name: "a" }), service({ name: "b" })]), reads);
    m.queued(first);
    assert.equal(reads.walks, 1, "the changes and what is pending are counted in one walk");
    m.synced("IPv4", { state: first, full: true, durationMs: 1 });
    assert.equal(reads.walks, 1, "the first sync takes its share of the same walk");
  });

  test("one walk of the first state for every family and every backend's series: to-ebpf and its nft companion", async () => {
    const ebpf = new SyncMetrics("walks-ebpf", ["IPv4", "IPv6"]);
    const companion = new SyncMetrics("walks-companion", ["IPv4", "IPv6"], Date.now, "nftables");
    const reads = { walks: 0, lookups: 0 };
    const local = service({
      name: "local",
      internalTrafficPolicy: "Local",
      ports: [port({ internalEndpoints: [ep("198.51.100.7")] })],
    });
    const v6 = service({ name: "v6", clusterIPs: ["2001:db8::1"] });
    const first = countedState(state([service({ name: "a" }), local, v6]), reads);
    for (const m of [ebpf, companion]) m.queued(first);
    for (const m of [ebpf, companion])
      for (const family of ["IPv4", "IPv6"] as const)
        m.synced(family, { state: first, full: true, durationMs: 1 });
    assert.equal(reads.walks, 1);
    // The shares are each family's own: what a walk per series would have counted.
    const series = async (name: string, backend: string, family: string) =>
      (await values(name)).find((v) => v.labels.backend === backend && v.labels.ip_family === family)?.value;
    assert.equal(await series("kubeproxy_sync_proxy_rules_service_changes_total", "walks-ebpf", "IPv4"), 2);
    assert.equal(
      await series("kubeproxy_sync_proxy_rules_service_changes_total", "walks-companion", "IPv6"),
      1,
    );
    const noLocal = (await values("kubeproxy_sync_proxy_rules_no_local_endpoints_total")).filter(
      (v) => v.labels.backend === "walks-ebpf" && v.labels.traffic_policy === "internal",
    );
    assert.deepEqual(noLocal.map((v) => [v.labels.ip_family, v.value]).sort(), [
      ["IPv4", 1],
      ["IPv6", 0],
    ]);
  });
});
