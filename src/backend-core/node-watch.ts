// What a backend's rules take from this node's Node object, which the brain puts in the local
// state:
// - "primary" NodePort addresses as kube-proxy's nftables mode has them: the node's IPs. A
//   state that does not carry them (no Node object, or an older watch API server) leaves the
//   addresses of the default-route interfaces;
// - the pod CIDRs of --detect-local-mode NodeCIDR: the Node's spec.podCIDRs. Without them pod
//   traffic is not told apart.
// When the Node object later names other ones, the rules would be wrong: the backend stops with
// a log line so that it restarts with the new ones, as kube-proxy exits when the node's IPs or
// (in NodeCIDR mode) its podCIDRs change. A list that empties keeps the rules as they are.

import { type HostNetwork, primaryAddresses } from "../host/host-network.ts";
import type { LocalState, LocalStateFeed } from "../model/local.ts";
import type { Logger } from "../observability/log.ts";

/** Which of the Node's facts the rules depend on. */
interface NodeWatchWants {
  readonly ips: boolean;
  readonly podCIDRs: boolean;
}

/** A fact the rules were built with and what the Node object names now. */
export interface NodeChange {
  readonly field: "IPs" | "podCIDRs";
  readonly was: readonly string[];
  readonly now: readonly string[];
}

interface NodeWatch {
  /** False when the signal aborted before any state: nothing else is set. */
  readonly started: boolean;
  /** The node's primary IPs for the rules (empty unless wanted). */
  readonly ips: readonly string[];
  /** Whether they came from the Node object ("node") or the host's default-route interfaces. */
  readonly ipsFrom: "node" | "host";
  /** The Node's spec.podCIDRs (empty unless wanted, or when the Node holds none). */
  readonly podCIDRs: readonly string[];
  /** Resolves once a wanted fact differs from the one in use; never otherwise. */
  readonly changed: Promise<NodeChange>;
  stop(): void;
}

const sameList = (a: readonly string[], b: readonly string[]) => a.join(",") === b.join(",");

/** Waits for the first state of `feed`, then follows the wanted facts until `stop`. */
export async function watchNode(
  feed: LocalStateFeed,
  host: HostNetwork,
  signal: AbortSignal,
  wants: NodeWatchWants,
): Promise<NodeWatch> {
  let first: (state: LocalState | undefined) => void = () => {};
  const firstState = new Promise<LocalState | undefined>((resolve) => {
    first = resolve;
  });
  let changedTo: (change: NodeChange) => void = () => {};
  const changed = new Promise<NodeChange>((resolve) => {
    changedTo = resolve;
  });
  let inUse: { readonly ips: readonly string[]; readonly podCIDRs: readonly string[] } | undefined;
  let latest: LocalState | undefined;
  const check = () => {
    if (inUse === undefined || latest === undefined) return;
    const ips = latest.nodeIPs ?? [];
    const podCIDRs = latest.nodePodCIDRs ?? [];
    if (wants.ips && ips.length > 0 && !sameList(ips, inUse.ips))
      changedTo({ field: "IPs", was: inUse.ips, now: ips });
    else if (wants.podCIDRs && podCIDRs.length > 0 && !sameList(podCIDRs, inUse.podCIDRs))
      changedTo({ field: "podCIDRs", was: inUse.podCIDRs, now: podCIDRs });
  };
  const unsubscribe = feed.subscribe((state) => {
    if (latest === undefined) first(state);
    latest = state;
    check();
  });
  const onAbort = () => first(undefined);
  signal.addEventListener("abort", onAbort, { once: true });
  const state = await firstState;
  signal.removeEventListener("abort", onAbort);
  const stop = () => unsubscribe();
  if (state === undefined) {
    stop();
    return { started: false, ips: [], ipsFrom: "host", podCIDRs: [], changed, stop };
  }
  // A remote feed holds a watch per listener: none is kept for facts that never come.
  const carried =
    (wants.ips && state.nodeIPs !== undefined) || (wants.podCIDRs && state.nodePodCIDRs !== undefined);
  if (!carried) stop();
  const ofNode = wants.ips ? (state.nodeIPs ?? []) : [];
  const fromNode = ofNode.length > 0;
  const ips = !wants.ips
    ? []
    : fromNode
      ? ofNode
      : primaryAddresses(await host.defaultRouteInterfaces(), await host.interfaces());
  const podCIDRs = wants.podCIDRs ? (state.nodePodCIDRs ?? []) : [];
  inUse = { ips, podCIDRs };
  check();
  return { started: true, ips, ipsFrom: fromNode ? "node" : "host", podCIDRs, changed, stop };
}

/**
 * A signal that aborts, with a log line, when a followed fact of the Node changes; `error()` is
 * then what the backend ends with so that it restarts with the new rules.
 */
export function restartOnNodeChange(
  watch: NodeWatch | undefined,
  log: Logger,
): { readonly signal: AbortSignal; error(): Error | undefined } {
  const restart = new AbortController();
  let change: NodeChange | undefined;
  void watch?.changed.then((c) => {
    change = c;
    log.error(
      { was: c.was, now: c.now },
      `the node's ${c.field} changed: exiting so that the rules use the new ones at restart`,
    );
    restart.abort();
  });
  return {
    signal: restart.signal,
    error: () =>
      change &&
      new Error(`the node's ${change.field} changed to ${change.now.join(", ")}: restart to use them`),
  };
}
