// The last check before a backend drops traffic to unallocated Service addresses: a range that
// holds one of this node's own addresses or one of its default gateways is not a Service range
// (a typo, or a range meant for another cluster), and dropping in it would cut the node off its
// own link. Such a range is left out of the state the backend sees, with a warning and a count;
// the other ranges and everything else go on. Only the node knows its addresses and gateways,
// so this runs here rather than in the brain.

import { cidrContains } from "../model/ip.ts";
import {
  allServiceCIDRs,
  type LocalState,
  type LocalStateFeed,
  NO_SERVICE_CIDRS,
  type ServiceCIDRsByFamily,
  splitServiceCIDRs,
} from "../model/local.ts";
import type { Logger } from "../observability/log.ts";
import { counter } from "../observability/metrics.ts";
import { type IpCommandHost, primaryAddresses } from "./host-network.ts";

const refusedTotal = counter(
  "kpng_service_ranges_refused_total",
  "Service IP ranges left out because they hold one of the node's addresses or gateways.",
);

interface ProtectedAddresses {
  /** The node's own addresses: those of the interfaces holding its default routes. */
  readonly nodeIPs: readonly string[];
  /** The next hops of the node's default routes. */
  readonly gateways: readonly string[];
}

/** This node's addresses and gateways, read once at start. */
export async function readProtectedAddresses(host: IpCommandHost): Promise<ProtectedAddresses> {
  // Addresses on other interfaces (a bridge or a pod gateway) may lie anywhere, even, on a
  // test bench, in a Service range; what the node lives on is its default route's link.
  const nodeIPs = primaryAddresses(await host.defaultRouteInterfaces(), await host.interfaces());
  return { nodeIPs, gateways: await host.defaultGateways() };
}

interface RefusedRange {
  readonly range: string;
  readonly reason: string;
}

/** Splits the ranges into those that may be dropped in and those that hold a protected address. */
export function checkServiceRanges(
  ranges: readonly string[],
  protect: ProtectedAddresses,
): { readonly kept: string[]; readonly refused: RefusedRange[] } {
  const kept: string[] = [];
  const refused: RefusedRange[] = [];
  for (const range of ranges) {
    const ip = protect.nodeIPs.find((a) => cidrContains(range, a));
    const gateway = protect.gateways.find((a) => cidrContains(range, a));
    if (ip !== undefined) refused.push({ range, reason: `holds the node's own address ${ip}` });
    else if (gateway !== undefined) refused.push({ range, reason: `holds the node's gateway ${gateway}` });
    else kept.push(range);
  }
  return { kept, refused };
}

/**
 * The feed with the unsafe ranges left out of every state. A warning is logged and counted when
 * the set of refused ranges changes, not at every state.
 */
export function guardServiceRanges(
  feed: LocalStateFeed,
  protect: ProtectedAddresses,
  log: Logger,
): LocalStateFeed {
  let lastInput: ServiceCIDRsByFamily | undefined;
  let lastKept: ServiceCIDRsByFamily = NO_SERVICE_CIDRS;
  let lastRefused = "";
  const guard = (state: LocalState): LocalState => {
    if (state.serviceCIDRs !== lastInput) {
      const { kept, refused } = checkServiceRanges(allServiceCIDRs(state.serviceCIDRs), protect);
      const key = refused.map((r) => r.range).join(",");
      if (key !== lastRefused) {
        for (const r of refused) {
          refusedTotal.inc();
          log.warn(
            { range: r.range, reason: r.reason },
            "refusing a Service IP range: traffic in it is not dropped; fix the ServiceCIDR or --service-cidrs",
          );
        }
      }
      lastRefused = key;
      lastInput = state.serviceCIDRs;
      lastKept = refused.length === 0 ? state.serviceCIDRs : splitServiceCIDRs(kept);
    }
    return lastKept === state.serviceCIDRs ? state : { ...state, serviceCIDRs: lastKept };
  };
  return {
    subscribe: (listener) => feed.subscribe((state) => listener(guard(state))),
    programmed: (state, families) => feed.programmed?.(state, families),
  };
}
