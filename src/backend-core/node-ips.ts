// "primary" NodePort addresses as kube-proxy's nftables mode has them: the node's IPs from its
// Node object, which the brain puts in the local state. A state that does not carry them (no
// Node object, or a state from the watch API) leaves the addresses of the default-route
// interfaces. When the Node object later names other IPs, the rules would serve the wrong
// addresses: the backend stops with a log line so that it restarts with the new ones, as
// kube-proxy exits when the node's IPs change.

import { type HostNetwork, primaryAddresses } from "../host/host-network.ts";
import type { LocalStateFeed } from "../model/local.ts";

interface NodeIPsWatch {
  /** The node's primary IPs for the rules; undefined when the signal aborted before any state. */
  readonly ips: readonly string[] | undefined;
  /** Whether they came from the Node object ("node") or the host's default-route interfaces. */
  readonly from: "node" | "host";
  /** Resolves with the Node object's new IPs once they differ from `ips`; never otherwise. */
  readonly changed: Promise<readonly string[]>;
  stop(): void;
}

const sameIPs = (a: readonly string[], b: readonly string[]) => a.join(",") === b.join(",");

/** Waits for the first state of `feed`, then follows the node's IPs until `stop`. */
export async function watchNodeIPs(
  feed: LocalStateFeed,
  host: HostNetwork,
  signal: AbortSignal,
): Promise<NodeIPsWatch> {
  // undefined: aborted; "unknown": the producer does not carry the node's IPs.
  let first: (ips: readonly string[] | "unknown" | undefined) => void = () => {};
  const firstIPs = new Promise<readonly string[] | "unknown" | undefined>((resolve) => {
    first = resolve;
  });
  let changedTo: (ips: readonly string[]) => void = () => {};
  const changed = new Promise<readonly string[]>((resolve) => {
    changedTo = resolve;
  });
  let inUse: readonly string[] | undefined;
  let latest: readonly string[] = [];
  let seen = false;
  // An empty list (the Node object lost its addresses) keeps the rules as they are.
  const check = () => {
    if (inUse !== undefined && latest.length > 0 && !sameIPs(latest, inUse)) changedTo(latest);
  };
  const unsubscribe = feed.subscribe((state) => {
    latest = state.nodeIPs ?? [];
    if (seen) check();
    else {
      seen = true;
      first(state.nodeIPs ?? "unknown");
    }
  });
  const onAbort = () => first(undefined);
  signal.addEventListener("abort", onAbort, { once: true });
  const fromState = await firstIPs;
  signal.removeEventListener("abort", onAbort);
  const stop = () => unsubscribe();
  if (fromState === undefined) {
    stop();
    return { ips: undefined, from: "host", changed, stop };
  }
  // A remote feed holds a watch per listener: none is kept for IPs that never come.
  if (fromState === "unknown") stop();
  const ofNode = fromState === "unknown" ? [] : fromState;
  const fromNode = ofNode.length > 0;
  inUse = fromNode ? ofNode : primaryAddresses(await host.defaultRouteInterfaces(), await host.interfaces());
  check();
  return { ips: inUse, from: fromNode ? "node" : "host", changed, stop };
}
