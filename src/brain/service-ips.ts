// A Service's addresses for one IP family, canonical. kube-proxy runs one proxier per family, and
// each looks only at its own family's addresses; these functions are that per-family view, and
// the only place where a Service's addresses are split by family.

import { canonicalIP, familyOfAddress, parseCidr } from "../model/ip.ts";
import type { IPFamily, Service } from "../model/kube.ts";

const FAMILIES: readonly IPFamily[] = ["IPv4", "IPv6"];

/** Most Services have no external IP, LB IP or source range: one empty list serves them all. */
const NONE: readonly string[] = Object.freeze([]);

/**
 * The cluster IP of this family, or "" when the service has none in it. spec.clusterIPs is read
 * by the index of the family in spec.ipFamilies; a service without ipFamilies (written by an
 * older API server) falls back to spec.clusterIP when its family matches.
 */
export function clusterIPForFamily(service: Service, family: IPFamily): string {
  const ip =
    service.ipFamilies.length === 0
      ? service.clusterIP
      : (service.clusterIPs[service.ipFamilies.indexOf(family)] ?? "");
  return familyOfAddress(ip) === family ? canonicalIP(ip) : "";
}

/** The families in which the service has a cluster IP, primary (spec.ipFamilies order) first. */
export function servedFamilies(service: Service): IPFamily[] {
  return servedClusterIPs(service).map(([family]) => family);
}

/** servedFamilies, each with its cluster IP (clusterIPForFamily), read once. */
export function servedClusterIPs(service: Service): [IPFamily, string][] {
  const out: [IPFamily, string][] = [];
  for (const family of service.ipFamilies.length > 0 ? service.ipFamilies : FAMILIES) {
    const ip = clusterIPForFamily(service, family);
    if (ip !== "") out.push([family, ip]);
  }
  return out;
}

export function externalIPsForFamily(service: Service, family: IPFamily): readonly string[] {
  if (service.externalIPs.length === 0) return NONE;
  return service.externalIPs.filter((ip) => familyOfAddress(ip) === family).map(canonicalIP);
}

/**
 * Load-balancer ingress IPs this node programs: ipMode VIP or unset. With ipMode Proxy the load
 * balancer delivers to the node IP and node port, so the ingress IP gets no rules; hostname-only
 * ingress points have nothing to program either.
 */
export function loadBalancerIPsForFamily(service: Service, family: IPFamily): readonly string[] {
  if (service.loadBalancerIngress.length === 0) return NONE;
  return service.loadBalancerIngress
    .filter((ing) => ing.ip !== "" && ing.ipMode !== "Proxy" && familyOfAddress(ing.ip) === family)
    .map((ing) => canonicalIP(ing.ip));
}

/**
 * loadBalancerSourceRanges of this family, trimmed (the API lets padding through) and with host
 * bits cleared; none when one of them is zero-length (0.0.0.0/0, ::/0), which allows any source.
 */
export function sourceRangesForFamily(service: Service, family: IPFamily): readonly string[] {
  if (service.loadBalancerSourceRanges.length === 0) return NONE;
  const out: string[] = [];
  for (const raw of service.loadBalancerSourceRanges) {
    const cidr = parseCidr(raw.trim());
    if (cidr === undefined || cidr.family !== family) continue;
    if (cidr.text.endsWith("/0")) return NONE;
    if (!out.includes(cidr.text)) out.push(cidr.text);
  }
  return out;
}
