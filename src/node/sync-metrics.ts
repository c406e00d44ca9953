// The sync metrics under kube-proxy's names, so existing dashboards and alerts keep working, with
// one `backend` label (kube-proxy's mode name) rather than one metric family per backend. Buckets
// follow kube-proxy's; the failure counter's name depends on the backend's mode, as kube-proxy's.
// The shared sync loop (backend-core/sync-loop.ts) feeds them for every backend.

import type { Counter } from "prom-client";
import type { LocalEndpoint, LocalService, LocalState } from "../model/local.ts";
import { serviceChanges } from "../model/local-changes.ts";
import { counter, gauge, histogram } from "../observability/metrics.ts";
import { stateChanges } from "./state-changes.ts";
import type { SyncOutcome } from "./sync-observer.ts";

/** 1 ms doubling 15 times (up to about 16 s), as kube-proxy's sync histograms. */
const SYNC_BUCKETS = Array.from({ length: 15 }, (_, i) => 0.001 * 2 ** i);

/** 0.25, 0.5, 1–59 s by 1, 60–115 s by 5, 120–300 s by 30: kube-proxy's network-programming buckets. */
const NETWORK_PROGRAMMING_BUCKETS = [
  0.25,
  0.5,
  ...Array.from({ length: 59 }, (_, i) => i + 1),
  ...Array.from({ length: 12 }, (_, i) => 60 + 5 * i),
  ...Array.from({ length: 7 }, (_, i) => 120 + 30 * i),
];

const syncDuration = histogram(
  "kubeproxy_sync_proxy_rules_duration_seconds",
  "Duration of every successful sync of the proxy rules.",
  SYNC_BUCKETS,
  ["backend"],
);
const fullSyncDuration = histogram(
  "kubeproxy_sync_full_proxy_rules_duration_seconds",
  "Duration of successful full syncs (start, after a failure or a repair).",
  SYNC_BUCKETS,
  ["backend"],
);
const partialSyncDuration = histogram(
  "kubeproxy_sync_partial_proxy_rules_duration_seconds",
  "Duration of successful partial syncs (only what changed).",
  SYNC_BUCKETS,
  ["backend"],
);
const networkProgramming = histogram(
  "kubeproxy_network_programming_duration_seconds",
  "From an EndpointSlice's last-change-trigger-time to the sync that programmed it.",
  NETWORK_PROGRAMMING_BUCKETS,
  ["backend"],
);
const lastSynced = gauge(
  "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
  "The last time the proxy rules were successfully synced (Unix seconds).",
  ["backend"],
);
const lastQueued = gauge(
  "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
  "The last time a sync of the proxy rules was queued (Unix seconds).",
  ["backend"],
);
const endpointChanges = counter(
  "kubeproxy_sync_proxy_rules_endpoint_changes_total",
  "Services whose endpoints changed, counted as the changes arrive.",
  ["backend"],
);
const serviceChangesTotal = counter(
  "kubeproxy_sync_proxy_rules_service_changes_total",
  "Services added, removed or changed, counted as the changes arrive.",
  ["backend"],
);
const endpointChangesPending = gauge(
  "kubeproxy_sync_proxy_rules_endpoint_changes_pending",
  "Services whose endpoint changes have arrived and wait for a sync.",
  ["backend"],
);
const serviceChangesPending = gauge(
  "kubeproxy_sync_proxy_rules_service_changes_pending",
  "Services added, removed or changed that wait for a sync.",
  ["backend"],
);
const noLocalEndpoints = gauge(
  "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
  "Services with a Local traffic policy and no local endpoints, by traffic policy.",
  ["backend", "traffic_policy"],
);

/** kube-proxy's name of each mode's failure counter. */
const FAILURE_METRIC: Readonly<Record<string, string>> = {
  nftables: "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
  iptables: "kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
};
const failureCounters = new Map<string, Counter>();

function failureCounter(mode: string): Counter {
  const name = FAILURE_METRIC[mode] ?? `kpng_${mode.replace(/\W/g, "_")}_sync_failures_total`;
  let c = failureCounters.get(name);
  if (c === undefined) {
    c = counter(name, `Failed syncs of the ${mode} rules (each is retried).`, ["backend"]);
    failureCounters.set(name, c);
  }
  return c;
}

const noLocal = (lists: readonly (readonly LocalEndpoint[])[]): boolean =>
  lists.every((l) => !l.some((e) => e.local));

/** internalTrafficPolicy Local, and no endpoint on this node. */
const lacksLocalInternal = (s: LocalService): boolean =>
  s.internalTrafficPolicy === "Local" && noLocal(s.ports.map((p) => p.internalEndpoints));

/** externalTrafficPolicy Local on a service reachable from outside, and no endpoint on this node. */
const lacksLocalExternal = (s: LocalService): boolean =>
  s.externalTrafficPolicy === "Local" &&
  s.ports.some((p) => p.nodePort > 0 || s.type === "LoadBalancer") &&
  noLocal(s.ports.map((p) => p.externalEndpoints));

function setMember(set: Set<string>, key: string, member: boolean): void {
  if (member) set.add(key);
  else set.delete(key);
}

export class SyncMetrics {
  readonly #failures: Counter;
  readonly #labels: { readonly backend: string };
  readonly #now: () => number;
  /** Metrics of changes older than this are not observed, as kube-proxy skips them at start. */
  readonly #startedAt: number;
  #lastQueued: LocalState | undefined;
  #lastSynced: LocalState | undefined;
  /** The services counted by kubeproxy_sync_proxy_rules_no_local_endpoints_total, per policy. */
  readonly #noLocalInternal = new Set<string>();
  readonly #noLocalExternal = new Set<string>();

  constructor(mode: string, now: () => number = Date.now) {
    this.#failures = failureCounter(mode);
    this.#labels = { backend: mode };
    // Every series exists from the start, at zero, as kube-proxy's unlabelled ones did.
    for (const h of [syncDuration, fullSyncDuration, partialSyncDuration, networkProgramming])
      h.zero(this.#labels);
    for (const c of [this.#failures, endpointChanges, serviceChangesTotal]) c.inc(this.#labels, 0);
    for (const g of [endpointChangesPending, serviceChangesPending]) g.set(this.#labels, 0);
    this.#now = now;
    this.#startedAt = now();
  }

  queued(state: LocalState): void {
    lastQueued.set(this.#labels, this.#now() / 1000);
    const c = stateChanges(this.#lastQueued, state);
    this.#lastQueued = state;
    serviceChangesTotal.inc(this.#labels, c.services);
    endpointChanges.inc(this.#labels, c.endpoints);
    this.#setPending();
  }

  /** What the latest state changed since the last one synced, distinct services counted once. */
  #setPending(): void {
    const queued = this.#lastQueued;
    const c =
      queued === undefined || queued === this.#lastSynced
        ? { services: 0, endpoints: 0 }
        : stateChanges(this.#lastSynced, queued);
    serviceChangesPending.set(this.#labels, c.services);
    endpointChangesPending.set(this.#labels, c.endpoints);
  }

  synced(o: SyncOutcome): void {
    const seconds = o.durationMs / 1000;
    syncDuration.observe(this.#labels, seconds);
    (o.full ? fullSyncDuration : partialSyncDuration).observe(this.#labels, seconds);
    const now = this.#now();
    lastSynced.set(this.#labels, now / 1000);
    for (const [key, prev, s] of serviceChanges(this.#lastSynced, o.state)) {
      const t = s?.endpointsChangedAt;
      if (t !== undefined && t >= this.#startedAt && t !== prev?.endpointsChangedAt) {
        networkProgramming.observe(this.#labels, Math.max(0, now - t) / 1000);
      }
      setMember(this.#noLocalInternal, key, s !== undefined && lacksLocalInternal(s));
      setMember(this.#noLocalExternal, key, s !== undefined && lacksLocalExternal(s));
    }
    noLocalEndpoints.set({ ...this.#labels, traffic_policy: "internal" }, this.#noLocalInternal.size);
    noLocalEndpoints.set({ ...this.#labels, traffic_policy: "external" }, this.#noLocalExternal.size);
    this.#lastSynced = o.state;
    this.#setPending();
  }

  failed(): void {
    this.#failures.inc(this.#labels);
  }
}
