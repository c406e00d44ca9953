// Removes what kube-proxy leaves in the kernel, in any of its modes, and nothing else:
//   - its iptables chains and the jumps to them, in iptables-nft and iptables-legacy, IPv4 and IPv6;
//   - its nftables tables (`ip kube-proxy`, `ip6 kube-proxy`);
//   - its IPVS virtual servers, the kube-ipvs0 dummy interface and its ipsets, where present.
// A tool that is missing, or a subsystem the kernel lacks, is skipped with a log line.

import type { Logger } from "../../observability/log.ts";
import type { CommandRunner } from "./command.ts";
import { planIptables, restoreText } from "./iptables-plan.ts";
import { addressesOf, kubeProxyVirtualServers, parseIpvsSave } from "./ipvs-plan.ts";
import { kubeProxyCleanupFailuresTotal, kubeProxyObjectsRemovedTotal } from "./metrics.ts";
import { kubeProxyIpsets, kubeProxyNftTables, nftDeleteText } from "./nft-plan.ts";

const IPTABLES_VARIANTS = [
  ["iptables-nft-save", "iptables-nft-restore"],
  ["ip6tables-nft-save", "ip6tables-nft-restore"],
  ["iptables-legacy-save", "iptables-legacy-restore"],
  ["ip6tables-legacy-save", "ip6tables-legacy-restore"],
] as const;

/** Every program the kube-proxy cleanup may start (the image must contain them). */
export const KUBE_PROXY_CLEANUP_BINARIES: readonly string[] = [
  ...IPTABLES_VARIANTS.flat(),
  "nft",
  "ipset",
  "ipvsadm",
  "ip",
];

const IPVS_DUMMY = "kube-ipvs0";

interface CleanupReport {
  /** "iptables-nft-save nat KUBE-SERVICES", … */
  readonly iptablesChains: string[];
  iptablesRules: number;
  readonly keptChains: string[];
  readonly nftTables: string[];
  readonly virtualServers: string[];
  dummyInterface: boolean;
  readonly ipsets: string[];
  readonly skipped: string[];
  readonly failures: string[];
}

export async function removeKubeProxyLeftovers(runner: CommandRunner, log: Logger): Promise<CleanupReport> {
  const report: CleanupReport = {
    iptablesChains: [],
    iptablesRules: 0,
    keptChains: [],
    nftTables: [],
    virtualServers: [],
    dummyInterface: false,
    ipsets: [],
    skipped: [],
    failures: [],
  };
  const fail = (what: string, stderr: string) => {
    report.failures.push(`${what}: ${stderr.trim()}`);
    kubeProxyCleanupFailuresTotal.inc({ tool: what.split(" ")[0] ?? what });
    log.error({ what, stderr: stderr.trim() }, "kube-proxy cleanup step failed");
  };

  for (const [save, restore] of IPTABLES_VARIANTS) {
    const saved = await runner.run([save]);
    if (saved.code !== 0) {
      report.skipped.push(`${save}: ${saved.stderr.trim() || `exit ${saved.code}`}`);
      continue;
    }
    const plans = planIptables(saved.stdout);
    const text = restoreText(plans);
    for (const p of plans) report.keptChains.push(...p.keptChains.map((c) => `${save} ${p.table} ${c}`));
    if (text === "") continue;
    // -w: wait (up to 5 s) for the xtables lock that other iptables users hold while writing.
    const out = await runner.run([restore, "--noflush", "-w", "5"], text);
    if (out.code !== 0) {
      fail(restore, out.stderr);
      continue;
    }
    for (const p of plans) {
      report.iptablesChains.push(...p.removeChains.map((c) => `${save} ${p.table} ${c}`));
      report.iptablesRules += p.deleteRules.length;
    }
  }

  const tables = await runner.run(["nft", "list", "tables"]);
  if (tables.code !== 0) report.skipped.push(`nft: ${tables.stderr.trim() || `exit ${tables.code}`}`);
  else {
    const found = kubeProxyNftTables(tables.stdout);
    if (found.length > 0) {
      const out = await runner.run(["nft", "-f", "-"], nftDeleteText(found));
      if (out.code === 0) report.nftTables.push(...found);
      else fail("nft", out.stderr);
    }
  }

  await removeIpvs(runner, report, fail);

  const sets = await runner.run(["ipset", "list", "-n"]);
  if (sets.code !== 0) report.skipped.push(`ipset: ${sets.stderr.trim() || `exit ${sets.code}`}`);
  else {
    for (const name of kubeProxyIpsets(sets.stdout)) {
      const out = await runner.run(["ipset", "destroy", name]);
      if (out.code === 0) report.ipsets.push(name);
      else fail(`ipset destroy ${name}`, out.stderr);
    }
  }

  const removed = kubeProxyObjectsRemovedTotal;
  removed.inc({ kind: "iptables_chain" }, report.iptablesChains.length);
  removed.inc({ kind: "iptables_rule" }, report.iptablesRules);
  removed.inc({ kind: "nft_table" }, report.nftTables.length);
  removed.inc({ kind: "ipvs_virtual_server" }, report.virtualServers.length);
  removed.inc({ kind: "interface" }, report.dummyInterface ? 1 : 0);
  removed.inc({ kind: "ipset" }, report.ipsets.length);
  log.info(
    {
      iptablesChains: report.iptablesChains.length,
      iptablesRules: report.iptablesRules,
      keptChains: report.keptChains,
      nftTables: report.nftTables,
      virtualServers: report.virtualServers.length,
      dummyInterface: report.dummyInterface,
      ipsets: report.ipsets.length,
      skipped: report.skipped,
    },
    "removed kube-proxy's leftovers",
  );
  return report;
}

async function removeIpvs(
  runner: CommandRunner,
  report: CleanupReport,
  fail: (what: string, stderr: string) => void,
): Promise<void> {
  const dummy = await runner.run(["ip", "-o", "addr", "show", "dev", IPVS_DUMMY]);
  const dummyAddresses = dummy.code === 0 ? addressesOf(dummy.stdout) : new Set<string>();
  const saved = await runner.run(["ipvsadm", "-S", "-n"]);
  if (saved.code !== 0) report.skipped.push(`ipvsadm: ${saved.stderr.trim() || `exit ${saved.code}`}`);
  else {
    const all = await runner.run(["ip", "-o", "addr", "show"]);
    const nodeAddresses = all.code === 0 ? addressesOf(all.stdout) : new Set<string>();
    for (const vs of kubeProxyVirtualServers(parseIpvsSave(saved.stdout), dummyAddresses, nodeAddresses)) {
      const out = await runner.run(["ipvsadm", "-D", vs.protocolFlag, vs.service]);
      if (out.code === 0) report.virtualServers.push(`${vs.protocolFlag} ${vs.service}`);
      else fail(`ipvsadm -D ${vs.service}`, out.stderr);
    }
  }
  if (dummy.code === 0) {
    const out = await runner.run(["ip", "link", "del", IPVS_DUMMY]);
    if (out.code === 0) report.dummyInterface = true;
    else fail(`ip link del ${IPVS_DUMMY}`, out.stderr);
  }
}
