// Tests write a service's addresses as the flat lists of a Service spec; the model holds them
// split per family. These builders do the split, so a test row reads like the Kubernetes object.

import { familyOf } from "../../src/model/ip.ts";
import {
  acrossFamilies,
  clusterIPsOf,
  type LocalService,
  type LocalServiceFamily,
} from "../../src/model/local.ts";

/** A service's addresses as flat lists: one cluster IP per family, primary family first. */
export interface AddressLists {
  readonly clusterIPs?: readonly string[];
  readonly externalIPs?: readonly string[];
  readonly loadBalancerIPs?: readonly string[];
  readonly sourceRanges?: readonly string[];
}

/** Overrides of a LocalService, with its addresses given as flat lists. */
export type LocalServiceOverrides = Partial<LocalService> & AddressLists;

/** The model's per-family form of flat lists: one family per cluster IP, in their order. */
export function familiesOf(lists: AddressLists): LocalServiceFamily[] {
  const of = (list: readonly string[] | undefined, family: string) =>
    (list ?? []).filter((item) => familyOf(item) === family);
  return (lists.clusterIPs ?? []).map((clusterIP) => {
    const family = familyOf(clusterIP);
    if (family === undefined) throw new Error(`test cluster IP "${clusterIP}" is not an address`);
    return {
      family,
      clusterIP,
      externalIPs: of(lists.externalIPs, family),
      loadBalancerIPs: of(lists.loadBalancerIPs, family),
      sourceRanges: of(lists.sourceRanges, family),
    };
  });
}

/** `base` with the overrides applied; address lists not given keep the base's. */
function withOverrides(base: LocalService, over: LocalServiceOverrides): LocalService {
  const { clusterIPs, externalIPs, loadBalancerIPs, sourceRanges, ...rest } = over;
  const families =
    rest.families ??
    familiesOf({
      clusterIPs: clusterIPs ?? clusterIPsOf(base),
      externalIPs: externalIPs ?? acrossFamilies(base, "externalIPs"),
      loadBalancerIPs: loadBalancerIPs ?? acrossFamilies(base, "loadBalancerIPs"),
      sourceRanges: sourceRanges ?? acrossFamilies(base, "sourceRanges"),
    });
  return { ...base, ...rest, families };
}

/** A ClusterIP service "default/web" on 203.0.113.10, without ports, with the overrides applied. */
export function localService(over: LocalServiceOverrides = {}): LocalService {
  const base: LocalService = {
    namespace: "default",
    name: "web",
    type: "ClusterIP",
    families: familiesOf({ clusterIPs: ["203.0.113.10"] }),
    sessionAffinitySeconds: 0,
    internalTrafficPolicy: "Cluster",
    externalTrafficPolicy: "Cluster",
    healthCheckNodePort: 0,
    localReadyEndpoints: 0,
    ports: [],
  };
  return withOverrides(base, over);
}
