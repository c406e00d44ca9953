// Pure translation of one Service's port plan (`backend-core/port-plan.ts`) into iptables rules
// for one IP family. The plan holds every Service decision; this file only writes it as rules.
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

import type { FamilySettings } from "../../backend-core/family-settings.ts";
import { type PlanEndpoint, type PortPlan, planService } from "../../backend-core/port-plan.ts";
import { hostCIDR } from "../../model/ip.ts";
import { endpointString, type LocalService } from "../../model/local.ts";
import { LOCALHOST_V4, portChain, SHARED_CHAINS } from "./names.ts";
import { podTrafficMatches } from "./pod-traffic.ts";

/**
 * The lines a service adds to the shared chains: nat KPNG-SERVICES and KPNG-NODEPORTS dispatch;
 * filter KPNG-SERVICES and KPNG-NODEPORTS reject or drop what no endpoint serves, and filter
 * KPNG-FIREWALL drops load-balancer traffic the source ranges did not allow.
 */
type SharedLines = Readonly<
  Record<"natServices" | "natNodePorts" | "filterServices" | "filterNodePorts" | "filterFirewall", string[]>
>;

export type ServiceRules = SharedLines & {
  /** The service's own nat chains: name → full rule lines (`-A NAME …`). */
  readonly chains: ReadonlyMap<string, readonly string[]>;
  /** Cluster IPs of this family: unknown ports on them are rejected. */
  readonly clusterIPs: readonly string[];
};

/** ServiceRules while it is built. */
type RulesBuilder = SharedLines & { readonly chains: Map<string, string[]> };

function newRules(): RulesBuilder {
  return {
    chains: new Map(),
    natServices: [],
    natNodePorts: [],
    filterServices: [],
    filterNodePorts: [],
    filterFirewall: [],
  };
}

const EMPTY_RULES: ServiceRules = { ...newRules(), clusterIPs: [] };

/** Comments hold only characters that need no quoting care. */
function comment(text: string): string {
  return `-m comment --comment "${text.replace(/[^A-Za-z0-9/._:-]/g, "_")}"`;
}

export function serviceRules(svc: LocalService, cfg: FamilySettings): ServiceRules {
  const plan = planService(svc, cfg.family, cfg);
  if (plan === undefined) return EMPTY_RULES;
  const c = newRules();
  for (const port of plan.ports) addPortRules(c, port, cfg);
  return { ...c, clusterIPs: [plan.clusterIP] };
}

function addPortRules(c: RulesBuilder, p: PortPlan, cfg: FamilySettings) {
  const { protocol: proto, id, label: name } = p;
  const match = `-p ${proto} -m ${proto} --dport ${p.port}`;
  const noEndpoints = p.noEndpoints === "drop" ? "DROP" : "REJECT";
  const toClusterIP = `-d ${hostCIDR(p.clusterIP)} ${match}`;

  let internalChain: string | undefined;
  if (p.internal.length === 0) {
    c.filterServices.push(`-A ${SHARED_CHAINS.services} ${toClusterIP} ${comment(name)} -j ${noEndpoints}`);
  } else {
    internalChain = portChain.internal(id);
    const rules: string[] = [];
    if (p.clusterMasquerade === "all")
      rules.push(`-A ${internalChain} ${toClusterIP} -j ${SHARED_CHAINS.markForMasquerade}`);
    else if (p.clusterMasquerade === "non-pods")
      rules.push(`-A ${internalChain} ${toClusterIP} -j ${SHARED_CHAINS.masqueradeNonPods}`);
    rules.push(...balanceRules(c, internalChain, p, p.internal));
    c.chains.set(internalChain, rules);
    c.natServices.push(
      `-A ${SHARED_CHAINS.services} ${toClusterIP} ${comment(`${name} cluster IP`)} -j ${internalChain}`,
    );
  }

  if (!p.takesExternal) return;
  const lbIPs = p.loadBalancerIPs;
  let externalChain: string | undefined;
  if (p.servesExternal) {
    let endpointsChain: string | undefined;
    if (p.external.length > 0) {
      if (internalChain !== undefined && p.externalSameAsInternal) endpointsChain = internalChain;
      else {
        endpointsChain = portChain.externalEndpoints(id);
        c.chains.set(endpointsChain, balanceRules(c, endpointsChain, p, p.external));
      }
    }
    externalChain = portChain.external(id);
    c.chains.set(externalChain, externalRules(externalChain, p, internalChain, endpointsChain, cfg));
    for (const vip of p.externalIPs)
      c.natServices.push(
        `-A ${SHARED_CHAINS.services} -d ${hostCIDR(vip)} ${match} ${comment(`${name} external IP`)} -j ${externalChain}`,
      );
    if (p.nodePort > 0) {
      // Localhost NodePorts get a rule of their own, ahead, as kube-proxy's: its packet counter
      // feeds kubeproxy_iptables_localhost_nodeports_accepted_packets_total.
      if (cfg.localhostNodePorts === true && cfg.family === "IPv4")
        c.natNodePorts.push(
          `-A ${SHARED_CHAINS.nodePorts} -d ${LOCALHOST_V4} -p ${proto} -m ${proto} --dport ${p.nodePort} ${comment(name)} -j ${externalChain}`,
        );
      c.natNodePorts.push(
        `-A ${SHARED_CHAINS.nodePorts} -p ${proto} -m ${proto} --dport ${p.nodePort} ${comment(name)} -j ${externalChain}`,
      );
    }
  }
  if (externalChain !== undefined) {
    let lbTarget = externalChain;
    if (p.allowList !== undefined) {
      // Allowed sources go on to the external chain; the others return and are dropped by
      // filter KPNG-FIREWALL.
      lbTarget = portChain.firewall(id);
      const { sourceRanges, loadBalancerIPs } = p.allowList;
      c.chains.set(lbTarget, [
        ...sourceRanges.map((r) => `-A ${lbTarget} -s ${r} -g ${externalChain}`),
        ...loadBalancerIPs.map((lb) => `-A ${lbTarget} -s ${hostCIDR(lb)} -g ${externalChain}`),
      ]);
    }
    for (const lb of lbIPs)
      c.natServices.push(
        `-A ${SHARED_CHAINS.services} -d ${hostCIDR(lb)} ${match} ${comment(`${name} load balancer IP`)} -j ${lbTarget}`,
      );
  }
  // Load-balancer traffic that the firewall chain did not DNAT still has the LB IP as destination.
  if (p.allowList !== undefined)
    for (const lb of lbIPs)
      c.filterFirewall.push(
        `-A ${SHARED_CHAINS.firewall} -d ${hostCIDR(lb)} ${match} ${comment(name)} -j DROP`,
      );
  if (p.external.length === 0) {
    for (const vip of p.externalAddresses)
      c.filterServices.push(
        `-A ${SHARED_CHAINS.services} -d ${hostCIDR(vip)} ${match} ${comment(name)} -j ${noEndpoints}`,
      );
    if (p.nodePort > 0)
      for (const cidr of cfg.nodePortCIDRs)
        c.filterNodePorts.push(
          `-A ${SHARED_CHAINS.nodePorts} -d ${cidr} -p ${proto} -m ${proto} --dport ${p.nodePort} ${comment(name)} -j ${noEndpoints}`,
        );
  }
}

/**
 * The entry chain of NodePort, externalIP and load-balancer traffic: masquerade (eTP Cluster) or
 * the eTP Local short-circuit (pod sources to the internal chain unmasqueraded, node-local
 * sources masqueraded), then the external endpoints.
 */
function externalRules(
  chain: string,
  p: PortPlan,
  internalChain: string | undefined,
  endpointsChain: string | undefined,
  cfg: FamilySettings,
): string[] {
  const rules: string[] = [];
  if (p.masqueradeExternal) rules.push(`-A ${chain} -j ${SHARED_CHAINS.markForMasquerade}`);
  else if (p.shortCircuit && internalChain !== undefined) {
    if (p.shortCircuitPods)
      for (const pods of podTrafficMatches(cfg)) rules.push(`-A ${chain} ${pods} -g ${internalChain}`);
    rules.push(`-A ${chain} -m addrtype --src-type LOCAL -j ${SHARED_CHAINS.markForMasquerade}`);
    rules.push(`-A ${chain} -m addrtype --src-type LOCAL -g ${internalChain}`);
  }
  if (endpointsChain !== undefined) rules.push(`-A ${chain} -g ${endpointsChain}`);
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
function balanceRules(
  c: RulesBuilder,
  chain: string,
  p: PortPlan,
  endpoints: readonly PlanEndpoint[],
): string[] {
  const ips = endpoints.map((ep) => ep.ip);
  if (p.affinitySeconds > 0 || new Set(ips).size < ips.length)
    return balanceOverEndpointChains(c, chain, p, endpoints);
  const n = endpoints.length;
  const dnat = (i: number) =>
    `-p ${p.protocol} -j DNAT --to-destination ${endpointString(endpoints[i] ?? { ip: "", port: 0 })}`;
  const source = (i: number) => hostCIDR(ips[i] ?? "");
  if (n === 1)
    return [`-A ${chain} -s ${source(0)} -j ${SHARED_CHAINS.markForMasquerade}`, `-A ${chain} ${dnat(0)}`];
  const hairpin = portChain.hairpin(chain);
  const rules: string[] = [];
  for (let i = 0; i < n; i++) {
    const pick = i < n - 1 ? probability(i, n) : "";
    rules.push(`-A ${chain} -s ${source(i)} ${pick}-j ${hairpin}`);
    // The last rule needs no `! -s`: a connection from that endpoint took the rule before.
    rules.push(`-A ${chain} ${i < n - 1 ? `! -s ${source(i)} ` : ""}${pick}${dnat(i)}`);
  }
  c.chains.set(hairpin, [
    `-A ${hairpin} -j ${SHARED_CHAINS.markForMasquerade}`,
    ...ips.map((_, i) => `-A ${hairpin} -s ${source(i)} ${dnat(i)}`),
  ]);
  return rules;
}

/** A chain per endpoint: `recent` affinity lists are named after it. */
function balanceOverEndpointChains(
  c: RulesBuilder,
  chain: string,
  p: PortPlan,
  endpoints: readonly PlanEndpoint[],
): string[] {
  const { affinitySeconds, protocol: proto } = p;
  const sticky: string[] = [];
  const picks: string[] = [];
  const n = endpoints.length;
  endpoints.forEach((ep, i) => {
    const { ip } = ep;
    const sep = portChain.endpoint(p.id, ip, ep.port);
    const remember = affinitySeconds > 0 ? `-m recent --set --name ${sep} --rsource ` : "";
    c.chains.set(sep, [
      // Hairpin: an endpoint that reached itself through the service must see the node as source.
      `-A ${sep} -s ${hostCIDR(ip)} -j ${SHARED_CHAINS.markForMasquerade}`,
      `-A ${sep} -p ${proto} ${remember}-j DNAT --to-destination ${endpointString(ep)}`,
    ]);
    if (affinitySeconds > 0)
      sticky.push(
        `-A ${chain} -m recent --rcheck --seconds ${affinitySeconds} --reap --name ${sep} --rsource -j ${sep}`,
      );
    picks.push(`-A ${chain} ${i < n - 1 ? probability(i, n) : ""}-j ${sep}`);
  });
  return [...sticky, ...picks];
}
