// The sync metrics under kube-proxy's names and labels, so existing dashboards and alerts keep
// working: `ip_family` as kube-proxy's (each family is synced and timed on its own), plus one
// `backend` label (kube-proxy's mode name) rather than one metric family per backend. Buckets
// follow kube-proxy's; the failure counter's name depends on the backend's mode, as kube-proxy's.
// The shared sync loop (backend-core/sync-loop.ts) feeds them for every backend. A backend that
// programs both families in one write would report under an empty `ip_family`.

import type { Counter } from "prom-client";
import type { LocalService, LocalState } from "../model/local.ts";
import { serviceChanges } from "../model/local-changes.ts";
import { counter, gauge, histogram } from "../observability/metrics.ts";
import {
  type FamilyScope,
  firstStateShare,
  inFamily,
  lacksLocalExternal,
  lacksLocalInternal,
} from "./first-state-walk.ts";
import { type StateChanges, stateChanges } from "./state-changes.ts";
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
  ["backend", "ip_family"],
);
const fullSyncDuration = histogram(
  "kubeproxy_sync_full_proxy_rules_duration_seconds",
  "Duration of successful full syncs (start, after a failure or a repair).",
  SYNC_BUCKETS,
  ["backend", "ip_family"],
);
const partialSyncDuration = histogram(
  "kubeproxy_sync_partial_proxy_rules_duration_seconds",
  "Duration of successful partial syncs (only what changed).",
  SYNC_BUCKETS,
  ["backend", "ip_family"],
);
const networkProgramming = histogram(
  "kubeproxy_network_programming_duration_seconds",
  "From an EndpointSlice's last-change-trigger-time to the sync that programmed it.",
  NETWORK_PROGRAMMING_BUCKETS,
  ["backend", "ip_family"],
);
const lastSynced = gauge(
  "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
  "The last time the proxy rules were successfully synced (Unix seconds).",
  ["backend", "ip_family"],
);
const lastQueued = gauge(
  "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
  "The last time a sync of the proxy rules was queued (Unix seconds).",
  ["backend", "ip_family"],
);
const endpointChanges = counter(
  "kubeproxy_sync_proxy_rules_endpoint_changes_total",
  "Services whose endpoints changed, counted as the changes arrive.",
  ["backend", "ip_family"],
);
const serviceChangesTotal = counter(
  "kubeproxy_sync_proxy_rules_service_changes_total",
  "Services added, removed or changed, counted as the changes arrive.",
  ["backend", "ip_family"],
);
const endpointChangesPending = gauge(
  "kubeproxy_sync_proxy_rules_endpoint_changes_pending",
  "Services whose endpoint changes have arrived and wait for a sync.",
  ["backend", "ip_family"],
);
const serviceChangesPending = gauge(
  "kubeproxy_sync_proxy_rules_service_changes_pending",
  "Services added, removed or changed that wait for a sync.",
  ["backend", "ip_family"],
);
const noLocalEndpoints = gauge(
  "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
  "Services with a Local traffic policy and no local endpoints, by traffic policy.",
  ["backend", "ip_family", "traffic_policy"],
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
    c = counter(name, `Failed syncs of the ${mode} rules (each is retried).`, ["backend", "ip_family"]);
    failureCounters.set(name, c);
  }
  return c;
}

function setMember(set: Set<string>, key: string, member: boolean): void {
  if (member) set.add(key);
  else set.delete(key);
}

/** One family's series of one backend. */
class FamilySeries {
  readonly labels: { readonly backend: string; readonly ip_family: FamilyScope };
  readonly #family: FamilyScope;
  readonly #keep: (s: LocalService) => boolean;
  readonly #failures: Counter;
  readonly #now: () => number;
  readonly #startedAt: number;
  #lastQueued: LocalState | undefined;
  #lastSynced: LocalState | undefined;
  /** The services counted by kubeproxy_sync_proxy_rules_no_local_endpoints_total, per policy. */
  readonly #noLocalInternal = new Set<string>();
  readonly #noLocalExternal = new Set<string>();

  constructor(backend: string, family: FamilyScope, failures: Counter, now: () => number) {
    this.labels = { backend, ip_family: family };
    this.#family = family;
    this.#keep = (s) => inFamily(s, family);
    this.#failures = failures;
    this.#now = now;
    this.#startedAt = now();
    // Every series exists from the start, at zero, as kube-proxy's.
    for (const h of [syncDuration, fullSyncDuration, partialSyncDuration, networkProgramming])
      h.zero(this.labels);
    for (const c of [this.#failures, endpointChanges, serviceChangesTotal]) c.inc(this.labels, 0);
    for (const g of [endpointChangesPending, serviceChangesPending]) g.set(this.labels, 0);
  }

  queued(state: LocalState): void {
    lastQueued.set(this.labels, this.#now() / 1000);
    const previous = this.#lastQueued;
    const c = this.#changes(previous, state);
    this.#lastQueued = state;
    serviceChangesTotal.inc(this.labels, c.services);
    endpointChanges.inc(this.labels, c.endpoints);
    // Queued right after the last sync (the first state, or a change between syncs): what is
    // pending is what this state changed, counted just now (at the first state, a walk of
    // every Service).
    this.#setPending(previous === this.#lastSynced ? c : undefined);
  }

  /** What the latest state changed since the last one synced, distinct services counted once. */
  #setPending(known?: StateChanges): void {
    const queued = this.#lastQueued;
    const c =
      queued === undefined || queued === this.#lastSynced
        ? { services: 0, endpoints: 0 }
        : (known ?? this.#changes(this.#lastSynced, queued));
    serviceChangesPending.set(this.labels, c.services);
    endpointChangesPending.set(this.labels, c.endpoints);
  }

  /** What `after` changed since `before`; a first state's share comes from the shared walk. */
  #changes(before: LocalState | undefined, after: LocalState): StateChanges {
    return before === undefined
      ? firstStateShare(after, this.#family).changes
      : stateChanges(before, after, this.#keep);
  }

  synced(o: SyncOutcome): void {
    const seconds = o.durationMs / 1000;
    syncDuration.observe(this.labels, seconds);
    (o.full ? fullSyncDuration : partialSyncDuration).observe(this.labels, seconds);
    const now = this.#now();
    lastSynced.set(this.labels, now / 1000);
    if (this.#lastSynced === undefined) this.#firstSynced(o.state, now);
    else this.#syncedChanges(this.#lastSynced, o.state, now);
    noLocalEndpoints.set({ ...this.labels, traffic_policy: "internal" }, this.#noLocalInternal.size);
    noLocalEndpoints.set({ ...this.labels, traffic_policy: "external" }, this.#noLocalExternal.size);
    this.#lastSynced = o.state;
    this.#setPending();
  }

  /** The first sync: every service of the family is new. */
  #firstSynced(state: LocalState, now: number): void {
    const share = firstStateShare(state, this.#family);
    for (const t of share.endpointsChangedAt) {
      if (t >= this.#startedAt) networkProgramming.observe(this.labels, Math.max(0, now - t) / 1000);
    }
    this.#noLocalInternal.clear();
    this.#noLocalExternal.clear();
    for (const key of share.noLocalInternal) this.#noLocalInternal.add(key);
    for (const key of share.noLocalExternal) this.#noLocalExternal.add(key);
  }

  #syncedChanges(before: LocalState, state: LocalState, now: number): void {
    const keep = this.#keep;
    for (const [key, was, is] of serviceChanges(before, state)) {
      const prev = was !== undefined && keep(was) ? was : undefined;
      const s = is !== undefined && keep(is) ? is : undefined;
      if (prev === undefined && s === undefined) continue;
      const t = s?.endpointsChangedAt;
      if (t !== undefined && t >= this.#startedAt && t !== prev?.endpointsChangedAt) {
        networkProgramming.observe(this.labels, Math.max(0, now - t) / 1000);
      }
      setMember(this.#noLocalInternal, key, s !== undefined && lacksLocalInternal(s));
      setMember(this.#noLocalExternal, key, s !== undefined && lacksLocalExternal(s));
    }
  }

  failed(): void {
    this.#failures.inc(this.labels);
  }
}

/**
 * The sync metrics of one backend, one series per family it programs, labelled with kube-proxy's
 * `ip_family` value, or "" for a write that programs both families at once.
 */
export class SyncMetrics {
  readonly #families: ReadonlyMap<FamilyScope, FamilySeries>;

  /**
   * `backend` is the label; `mode`, kube-proxy's mode name that names the failure counter, is
   * the label too unless the rules are another backend's companion ("ebpf-nftables" runs nftables).
   */
  constructor(
    backend: string,
    families: readonly FamilyScope[],
    now: () => number = Date.now,
    mode: string = backend,
  ) {
    const failures = failureCounter(mode);
    this.#families = new Map(families.map((f) => [f, new FamilySeries(backend, f, failures, now)]));
  }

  #series(family: FamilyScope): FamilySeries {
    const s = this.#families.get(family);
    if (s === undefined) throw new Error(`no sync metrics for family "${family}"`);
    return s;
  }

  /** A new state arrived: it is queued for every family. */
  queued(state: LocalState): void {
    for (const s of this.#families.values()) s.queued(state);
  }

  /** One family's sync succeeded, taking `durationMs` of its own. */
  synced(family: FamilyScope, o: SyncOutcome): void {
    this.#series(family).synced(o);
  }

  failed(family: FamilyScope): void {
    this.#series(family).failed();
  }
}
