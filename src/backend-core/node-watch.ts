// What a backend's rules take from the node beyond the Services, followed while kpng runs:
// - the primary IPs ("primary" NodePort addresses as kube-proxy's nftables mode has them, and
//   the node's own addresses for loadBalancerSourceRanges): the Node object's IPs, which the
//   brain puts in the local state; a state that does not carry them (no Node object, or an
//   older watch API server) leaves the addresses of the default-route interfaces;
// - the pod CIDRs of --detect-local-mode NodeCIDR: the Node's spec.podCIDRs;
// - every address of the node's interfaces (NodePort addresses in --nodeport-addresses CIDRs,
//   healthCheckNodePort listeners, eBPF's NodePort IPs), from host/address-watch.ts.
// When one changes, the backend updates its rules in place through its sync loop (followNode).
// A list from the Node object that empties keeps the rules as they are.

import { type HostAddressWatch, watchHostAddresses } from "../host/address-watch.ts";
import type { HostNetwork } from "../host/host-network.ts";
import { healthCheckAddresses } from "../host/listen-addresses.ts";
import { type TrafficAddressSettings, trafficAddresses } from "../host/traffic-addresses.ts";
import type { LocalState, LocalStateFeed } from "../model/local.ts";
import type { Logger } from "../observability/log.ts";
import { counter } from "../observability/metrics.ts";

/** Which of the Node object's facts the rules depend on. */
interface NodeWatchWants {
  readonly ips: boolean;
  readonly podCIDRs: boolean;
}

/** The node as the rules see it. */
export interface NodeFacts {
  /** The Node object's IPs when it names some (and they are wanted), else the default-route interfaces'. */
  readonly primaryIPs: readonly string[];
  readonly primaryFrom: "node" | "host";
  /** The Node's spec.podCIDRs (empty unless wanted, or when the Node holds none). */
  readonly podCIDRs: readonly string[];
  /** Every address of the node's interfaces. */
  readonly hostIPs: readonly string[];
}

/** Something followed: its value now, and a call after each change. */
interface Followed<F> {
  current(): F;
  subscribe(listener: () => void): () => void;
}

interface NodeWatch extends Followed<NodeFacts> {
  /** False when the signal aborted before any state: nothing else is meaningful. */
  readonly started: boolean;
  stop(): void;
}

const sameList = (a: readonly string[], b: readonly string[]) => a.join(",") === b.join(",");

const sameFacts = (a: NodeFacts, b: NodeFacts) =>
  a.primaryFrom === b.primaryFrom &&
  sameList(a.primaryIPs, b.primaryIPs) &&
  sameList(a.podCIDRs, b.podCIDRs) &&
  sameList(a.hostIPs, b.hostIPs);

/** Waits for the first state of `feed`, then follows the wanted facts and `addresses` until `stop`. */
export async function watchNode(
  feed: LocalStateFeed,
  addresses: HostAddressWatch,
  signal: AbortSignal,
  wants: NodeWatchWants,
): Promise<NodeWatch> {
  const { promise: firstState, resolve: first } = Promise.withResolvers<LocalState | undefined>();
  const listeners = new Set<() => void>();
  // The Node's lists last seen non-empty: an emptied list keeps the rules as they are.
  let nodeIPs: readonly string[] = [];
  let podCIDRs: readonly string[] = [];
  let seen = false;
  const factsNow = (): NodeFacts => {
    const host = addresses.current;
    const fromNode = nodeIPs.length > 0;
    return {
      primaryIPs: fromNode ? nodeIPs : host.primary,
      primaryFrom: fromNode ? "node" : "host",
      podCIDRs,
      hostIPs: host.all,
    };
  };
  let facts = factsNow();
  const recompute = () => {
    const next = factsNow();
    if (sameFacts(next, facts)) return;
    facts = next;
    for (const listener of listeners) listener();
  };
  const unsubscribeFeed = feed.subscribe((state) => {
    if (!seen) first(state);
    seen = true;
    if (wants.ips && (state.nodeIPs?.length ?? 0) > 0) nodeIPs = state.nodeIPs ?? [];
    if (wants.podCIDRs && (state.nodePodCIDRs?.length ?? 0) > 0) podCIDRs = state.nodePodCIDRs ?? [];
    recompute();
  });
  const onAbort = () => first(undefined);
  signal.addEventListener("abort", onAbort, { once: true });
  const state = await firstState;
  signal.removeEventListener("abort", onAbort);
  let feedFollowed = true;
  const stopFeed = () => {
    if (feedFollowed) unsubscribeFeed();
    feedFollowed = false;
  };
  const unsubscribeHost = addresses.subscribe(recompute);
  const stop = () => {
    stopFeed();
    unsubscribeHost();
    listeners.clear();
  };
  if (state === undefined) stop();
  // A remote feed holds a watch per listener: none is kept for facts that never come.
  else if (
    !((wants.ips && state.nodeIPs !== undefined) || (wants.podCIDRs && state.nodePodCIDRs !== undefined))
  )
    stopFeed();
  return {
    started: state !== undefined,
    current: () => facts,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stop,
  };
}

/**
 * Reads the node's addresses and follows them, and waits for the first state: the node as the
 * rules see it, followed until `stop()`; undefined when the signal aborted first.
 */
export async function startNodeWatch(
  feed: LocalStateFeed,
  host: HostNetwork,
  signal: AbortSignal,
  log: Logger,
  wants: NodeWatchWants,
): Promise<{ readonly watch: NodeWatch; stop(): void } | undefined> {
  const addresses = await watchHostAddresses(host, log);
  const watch = await watchNode(feed, addresses, signal, wants);
  const stop = () => {
    watch.stop();
    addresses.stop();
  };
  if (!watch.started) {
    stop();
    return undefined;
  }
  if (wants.podCIDRs && watch.current().podCIDRs.length === 0)
    log.warn(
      "--detect-local-mode NodeCIDR: the Node has no podCIDRs yet; pod traffic is not told apart until it has",
    );
  return { watch, stop };
}

const addressChanges = counter(
  "kpng_node_address_changes_total",
  "Changes of the node's addresses (or the Node's IPs and podCIDRs) that the rules depend on, applied in place.",
  ["backend"],
);

/**
 * Calls `apply` whenever what `derive` makes of the node's facts changes (a plain-data summary
 * of the addresses the rules use, compared as JSON), with a log line naming the old and new values and a count in
 * kpng_node_address_changes_total. `apply` updates the rules in place (the sync loop rewrites
 * them from the new configuration); it is not called for changes that do not matter to them.
 */
export function followNode<F, T>(
  followed: Followed<F>,
  o: {
    readonly backend: string;
    readonly log: Logger;
    readonly derive: (facts: F) => T;
    readonly apply: (now: T, facts: F, was: T) => void;
  },
): () => void {
  addressChanges.inc({ backend: o.backend }, 0);
  let inUse = o.derive(followed.current());
  return followed.subscribe(() => {
    const facts = followed.current();
    let next: T;
    try {
      next = o.derive(facts);
    } catch (err) {
      o.log.error({ err: String(err) }, "cannot use the node's new addresses; keeping the rules as they are");
      return;
    }
    if (JSON.stringify(next) === JSON.stringify(inUse)) return;
    const was = inUse;
    inUse = next;
    addressChanges.inc({ backend: o.backend });
    o.log.info({ was, now: next }, "the node's addresses changed: updating the rules in place");
    o.apply(next, facts, was);
  });
}

/**
 * The addresses the nft and iptables rules and the healthCheckNodePort servers use, for
 * followNode; throws an Error naming a bad flag.
 */
export function rulesAddresses(settings: TrafficAddressSettings, facts: NodeFacts) {
  const t = trafficAddresses(settings, facts.primaryIPs, facts.podCIDRs);
  return {
    nodePortCIDRs: t.nodePortCIDRs,
    nodeIPs: t.nodeIPs,
    podCIDRs: t.podCIDRs,
    healthCheckAddresses: healthCheckAddresses(t.nodePortCIDRs, facts.hostIPs),
  };
}

type RulesAddresses = ReturnType<typeof rulesAddresses>;

/**
 * Whether the rules themselves must be rewritten: an address in a NodePort CIDR coming or going
 * changes only the healthCheckNodePort listeners (the rules match "a local address in the CIDR").
 */
export function rulesChanged(now: RulesAddresses, was: RulesAddresses): boolean {
  const rules = ({ healthCheckAddresses: _, ...r }: RulesAddresses) => JSON.stringify(r);
  return rules(now) !== rules(was);
}
