// Pure translation of one LocalService into iptables rules for one IP family. The brain already
// chose which endpoints serve internal and external traffic; this file only encodes the choice.
//
// nat table, per service port (chains owned by the service, rewritten only when it changes):
//   KPNG-SVC-*  balances over the internal endpoints (`statistic` probabilities 1/N, 1/(N-1), …)
//               and DNATs, after masquerading non-pod sources;
//   KPNG-HP-*   the hairpin DNATs of a balancing chain (mark for masquerade, DNAT by source);
//   KPNG-XEP-*  the same over the external endpoints when they differ from the internal ones;
//   KPNG-EXT-*  entry of NodePort/externalIP/LB traffic (masquerade, or eTP Local short-circuits);
//   KPNG-FW-*   loadBalancerSourceRanges: DNATs allowed sources only;
//   KPNG-SEP-*  one endpoint, only under ClientIP affinity (or endpoints sharing an address):
//               hairpin masquerade, affinity `recent --set`, DNAT.
// Lines for the shared chains (nat KPNG-SERVICES/KPNG-NODEPORTS dispatch; filter rejects, drops
// and firewall drops) are returned separately: those chains are rewritten on every sync.

import { canonicalIP, cidrContains } from "../../model/ip.ts";
import {
  endpointString,
  type LocalEndpoint,
  type LocalService,
  type LocalServicePort,
  ofFamily,
} from "../../model/local.ts";
import { hostCIDR, ipFamilyOfTools } from "./addresses.ts";
import type { FamilyConfig } from "./config.ts";
import { chainName, STATIC, servicePortId } from "./names.ts";

export interface ServiceRules {
  /** The service's own nat chains: name → full rule lines (`-A NAME …`). */
  readonly chains: ReadonlyMap<string, readonly string[]>;
  readonly natServices: readonly string[];
  readonly natNodePorts: readonly string[];
  /** filter KPNG-SERVICES: no-endpoint rejects and drops. */
  readonly filterServices: readonly string[];
  readonly filterNodePorts: readonly string[];
  readonly filterFirewall: readonly string[];
  /** Cluster IPs of this family: unknown ports on them are rejected. */
  readonly clusterIPs: readonly string[];
}

const EMPTY_RULES: ServiceRules = {
  chains: new Map(),
  natServices: [],
  natNodePorts: [],
  filterServices: [],
  filterNodePorts: [],
  filterFirewall: [],
  clusterIPs: [],
};

interface Collector {
  readonly chains: Map<string, string[]>;
  readonly natServices: string[];
  readonly natNodePorts: string[];
  readonly filterServices: string[];
  readonly filterNodePorts: string[];
  readonly filterFirewall: string[];
}

/** Comments hold only characters that need no quoting care. */
function comment(text: string): string {
  return `-m comment --comment "${text.replace(/[^A-Za-z0-9/._:-]/g, "_")}"`;
}

function addressesOfFamily(ips: readonly string[], cfg: FamilyConfig): string[] {
  return ofFamily(ips, ipFamilyOfTools(cfg.family)).map(canonicalIP);
}

function sameEndpoints(a: readonly LocalEndpoint[], b: readonly LocalEndpoint[]): boolean {
  return a.length === b.length && a.every((ep, i) => ep.ip === b[i]?.ip && ep.port === b[i]?.port);
}

export function renderService(svc: LocalService, cfg: FamilyConfig): ServiceRules {
  if (svc.type === "ExternalName") return EMPTY_RULES;
  const clusterIP = ofFamily(svc.clusterIPs, ipFamilyOfTools(cfg.family))[0];
  // As kube-proxy does, a family carries a service only when it has a ClusterIP there.
  if (clusterIP === undefined) return EMPTY_RULES;
  const cip = canonicalIP(clusterIP);
  const c: Collector = {
    chains: new Map(),
    natServices: [],
    natNodePorts: [],
    filterServices: [],
    filterNodePorts: [],
    filterFirewall: [],
  };
  for (const port of svc.ports) renderPort(c, svc, port, cip, cfg);
  return { ...c, clusterIPs: [cip] };
}

function renderPort(c: Collector, svc: LocalService, port: LocalServicePort, cip: string, cfg: FamilyConfig) {
  const proto = port.protocol.toLowerCase();
  const spId = servicePortId(svc.namespace, svc.name, proto, port.port);
  const name = `${svc.namespace}/${svc.name}:${port.name || port.port}`;
  const match = `-p ${proto} -m ${proto} --dport ${port.port}`;
  const internal = ofFamily(port.internalEndpoints, ipFamilyOfTools(cfg.family));
  const external = ofFamily(port.externalEndpoints, ipFamilyOfTools(cfg.family));
  const hasAny = port.endpointFamilies.includes(cfg.family === "ipv4" ? "IPv4" : "IPv6");
  const affinity = svc.sessionAffinitySeconds;
  // Reject (ICMP port unreachable) when nothing serves the port in this family; drop when
  // endpoints exist but a Local policy excludes all of them.
  const noEndpoints = hasAny ? "DROP" : "REJECT";
  const toClusterIP = `-d ${hostCIDR(cip)} ${match}`;

  let internalChain: string | undefined;
  if (internal.length === 0) {
    c.filterServices.push(`-A ${STATIC.services} ${toClusterIP} ${comment(name)} -j ${noEndpoints}`);
  } else {
    internalChain = chainName.internal(spId);
    const rules: string[] = [];
    if (cfg.masqueradeAll) rules.push(`-A ${internalChain} ${toClusterIP} -j ${STATIC.markForMasquerade}`);
    else if (cfg.podCIDRs.length > 0)
      rules.push(`-A ${internalChain} ${toClusterIP} -j ${STATIC.masqueradeNonPods}`);
    rules.push(...balance(c, internalChain, internal, spId, proto, affinity));
    c.chains.set(internalChain, rules);
    c.natServices.push(
      `-A ${STATIC.services} ${toClusterIP} ${comment(`${name} cluster IP`)} -j ${internalChain}`,
    );
  }

  const nodePort = cfg.nodePortCIDRs.length > 0 ? port.nodePort : 0;
  const externalIPs = addressesOfFamily(svc.externalIPs, cfg);
  const lbIPs = addressesOfFamily(svc.loadBalancerIPs, cfg);
  if (nodePort === 0 && externalIPs.length === 0 && lbIPs.length === 0) return;

  let externalChain: string | undefined;
  if (hasAny && (svc.externalTrafficPolicy === "Local" || external.length > 0)) {
    let endpointsChain: string | undefined;
    if (external.length > 0) {
      if (internalChain !== undefined && sameEndpoints(internal, external)) endpointsChain = internalChain;
      else {
        endpointsChain = chainName.externalEndpoints(spId);
        c.chains.set(endpointsChain, balance(c, endpointsChain, external, spId, proto, affinity));
      }
    }
    externalChain = chainName.external(spId);
    c.chains.set(externalChain, externalRules(externalChain, svc, internalChain, endpointsChain, cfg));
    for (const vip of externalIPs)
      c.natServices.push(
        `-A ${STATIC.services} -d ${hostCIDR(vip)} ${match} ${comment(`${name} external IP`)} -j ${externalChain}`,
      );
    if (nodePort > 0)
      c.natNodePorts.push(
        `-A ${STATIC.nodePorts} -p ${proto} -m ${proto} --dport ${nodePort} ${comment(name)} -j ${externalChain}`,
      );
  }
  const firewalled = lbIPs.length > 0 && svc.sourceRanges.length > 0;
  if (externalChain !== undefined) {
    let lbTarget = externalChain;
    if (firewalled) {
      lbTarget = chainName.firewall(spId);
      c.chains.set(lbTarget, firewallRules(lbTarget, externalChain, svc, lbIPs, cfg));
    }
    for (const lb of lbIPs)
      c.natServices.push(
        `-A ${STATIC.services} -d ${hostCIDR(lb)} ${match} ${comment(`${name} load balancer IP`)} -j ${lbTarget}`,
      );
  }
  // Load-balancer traffic that the firewall chain did not DNAT still has the LB IP as destination.
  if (firewalled)
    for (const lb of lbIPs)
      c.filterFirewall.push(`-A ${STATIC.firewall} -d ${hostCIDR(lb)} ${match} ${comment(name)} -j DROP`);
  if (external.length === 0) {
    for (const vip of [...externalIPs, ...lbIPs])
      c.filterServices.push(
        `-A ${STATIC.services} -d ${hostCIDR(vip)} ${match} ${comment(name)} -j ${noEndpoints}`,
      );
    if (nodePort > 0)
      for (const cidr of cfg.nodePortCIDRs)
        c.filterNodePorts.push(
          `-A ${STATIC.nodePorts} -d ${cidr} -p ${proto} -m ${proto} --dport ${nodePort} ${comment(name)} -j ${noEndpoints}`,
        );
  }
}

/**
 * The entry chain of NodePort, externalIP and load-balancer traffic.
 * - eTP Cluster: masquerade, then the external endpoints.
 * - eTP Local: pod traffic short-circuits to the internal chain unmasqueraded (as if it went out
 *   to a load balancer and back); traffic from the node itself is masqueraded and sent to the
 *   internal chain; everything else goes to the (local) external endpoints, keeping the client IP.
 */
function externalRules(
  chain: string,
  svc: LocalService,
  internalChain: string | undefined,
  endpointsChain: string | undefined,
  cfg: FamilyConfig,
): string[] {
  const rules: string[] = [];
  if (svc.externalTrafficPolicy === "Local") {
    if (internalChain !== undefined) {
      for (const pods of cfg.podCIDRs) rules.push(`-A ${chain} -s ${pods} -g ${internalChain}`);
      rules.push(`-A ${chain} -m addrtype --src-type LOCAL -j ${STATIC.markForMasquerade}`);
      rules.push(`-A ${chain} -m addrtype --src-type LOCAL -g ${internalChain}`);
    }
  } else {
    rules.push(`-A ${chain} -j ${STATIC.markForMasquerade}`);
  }
  if (endpointsChain !== undefined) rules.push(`-A ${chain} -g ${endpointsChain}`);
  return rules;
}

/**
 * loadBalancerSourceRanges: allowed sources go on to the external chain; the others return and
 * are dropped by filter KPNG-FIREWALL. When a range holds one of the node's IPs, the LB IPs
 * themselves are allowed too, so traffic the node sends to its own VIP passes.
 */
function firewallRules(
  chain: string,
  externalChain: string,
  svc: LocalService,
  lbIPs: readonly string[],
  cfg: FamilyConfig,
): string[] {
  const ranges = ofFamily(svc.sourceRanges, ipFamilyOfTools(cfg.family));
  const rules = ranges.map((r) => `-A ${chain} -s ${r} -g ${externalChain}`);
  if (ranges.some((r) => cfg.nodeIPs.some((ip) => cidrContains(r, ip)))) {
    for (const lb of lbIPs) rules.push(`-A ${chain} -s ${hostCIDR(lb)} -g ${externalChain}`);
  }
  return rules;
}

function probability(i: number, n: number): string {
  return `-m statistic --mode random --probability ${(1 / (n - i)).toFixed(10)} `;
}

/**
 * Uniform choice among endpoints: rule i matches with probability 1/(N-i), the last one always.
 * Without affinity the service chain DNATs by itself, so a service costs two chains however many
 * endpoints it has (fewer chains make iptables-restore and the kernel table much cheaper):
 *   -s <ep i> <pick i> -j KPNG-HP-*     a connection from endpoint i that picked itself (hairpin)
 *   ! -s <ep i> <pick i> -j DNAT <ep i> everyone else who picked endpoint i
 * and KPNG-HP-* marks for masquerade and DNATs by source: the source is the picked endpoint. Both
 * rules of an endpoint draw at the same place in the sequence, so the choice stays uniform for
 * every source. One endpoint needs no draw and no hairpin chain. ClientIP affinity (its `recent`
 * lists are per endpoint) and endpoints sharing an address (the source would not say which one
 * was picked) keep a chain per endpoint.
 */
function balance(
  c: Collector,
  chain: string,
  endpoints: readonly LocalEndpoint[],
  spId: string,
  proto: string,
  affinitySeconds: number,
): string[] {
  const ips = endpoints.map((ep) => canonicalIP(ep.ip));
  if (affinitySeconds > 0 || new Set(ips).size < ips.length)
    return balanceOverEndpointChains(c, chain, endpoints, spId, proto, affinitySeconds);
  const n = endpoints.length;
  const dnat = (i: number) =>
    `-p ${proto} -j DNAT --to-destination ${endpointString({ ip: ips[i] ?? "", port: endpoints[i]?.port ?? 0 })}`;
  const source = (i: number) => hostCIDR(ips[i] ?? "");
  if (n === 1)
    return [`-A ${chain} -s ${source(0)} -j ${STATIC.markForMasquerade}`, `-A ${chain} ${dnat(0)}`];
  const hairpin = chainName.hairpin(chain);
  const rules: string[] = [];
  for (let i = 0; i < n; i++) {
    const pick = i < n - 1 ? probability(i, n) : "";
    rules.push(`-A ${chain} -s ${source(i)} ${pick}-j ${hairpin}`);
    // The last rule needs no `! -s`: a connection from that endpoint took the rule before.
    rules.push(`-A ${chain} ${i < n - 1 ? `! -s ${source(i)} ` : ""}${pick}${dnat(i)}`);
  }
  c.chains.set(hairpin, [
    `-A ${hairpin} -j ${STATIC.markForMasquerade}`,
    ...ips.map((_, i) => `-A ${hairpin} -s ${source(i)} ${dnat(i)}`),
  ]);
  return rules;
}

/** A chain per endpoint: `recent` affinity lists are named after it. */
function balanceOverEndpointChains(
  c: Collector,
  chain: string,
  endpoints: readonly LocalEndpoint[],
  spId: string,
  proto: string,
  affinitySeconds: number,
): string[] {
  const sticky: string[] = [];
  const picks: string[] = [];
  const n = endpoints.length;
  endpoints.forEach((ep, i) => {
    const ip = canonicalIP(ep.ip);
    const sep = chainName.endpoint(spId, ip, ep.port);
    const remember = affinitySeconds > 0 ? `-m recent --set --name ${sep} --rsource ` : "";
    c.chains.set(sep, [
      // Hairpin: an endpoint that reached itself through the service must see the node as source.
      `-A ${sep} -s ${hostCIDR(ip)} -j ${STATIC.markForMasquerade}`,
      `-A ${sep} -p ${proto} ${remember}-j DNAT --to-destination ${endpointString({ ip, port: ep.port })}`,
    ]);
    if (affinitySeconds > 0)
      sticky.push(
        `-A ${chain} -m recent --rcheck --seconds ${affinitySeconds} --reap --name ${sep} --rsource -j ${sep}`,
      );
    picks.push(`-A ${chain} ${i < n - 1 ? probability(i, n) : ""}-j ${sep}`);
  });
  return [...sticky, ...picks];
}
