// iptables backend programming time, with the real iptables-restore in a private network
// namespace, for both variants (iptables-nft and iptables-legacy):
//   - cold start of 1k and 10k ClusterIP services with 2 endpoints each;
//   - latency of one endpoint change (p50/p99 over 100 changes);
// each beside an upstream-shaped ruleset (kube-proxy's iptables mode: a chain per service and per
// endpoint, `statistic` probabilities, one KUBE-SERVICES rule per service) loaded by one
// `iptables-restore` of the whole nat table, generated in the same run. Needs root.
//   node bench/iptables-sync.ts [--sizes=1000,10000] [--variants=nft,legacy] [--changes=100] [--quick]
// --quick: 1k services, 20 changes.

import { spawn } from "node:child_process";
import type { IpFamily } from "../src/backends/iptables/addresses.ts";
import { IptablesBackend } from "../src/backends/iptables/backend.ts";
import type { FamilyConfig } from "../src/backends/iptables/config.ts";
import { binary, ExecIptablesRunner, type Variant } from "../src/backends/iptables/runner.ts";
import { silentLogger } from "../src/observability/log.ts";
import { ipOf, openBenchNetns, quantile } from "./lib/nft-netns.ts";
import { stateOf, svc } from "./lib/services.ts";

function arg(name: string, fallback: string): string {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a ? a.slice(name.length + 3) : fallback;
}
const quick = process.argv.includes("--quick");
const SIZES = arg("sizes", quick ? "1000" : "1000,10000")
  .split(",")
  .map(Number);
const VARIANTS = arg("variants", "nft,legacy").split(",") as Variant[];
const CHANGES = Number(arg("changes", quick ? "20" : "100"));

const CFG: FamilyConfig = {
  family: "ipv4",
  nodePortCIDRs: ["192.0.2.1/32"],
  podCIDRs: ["10.0.0.0/8"],
  masqueradeAll: false,
  nodeIPs: ["192.0.2.1"],
};

/** The whole nat table in the shape kube-proxy's iptables mode writes it (same rule forms). */
export function upstreamShaped(n: number): string {
  const chains = [
    ":KUBE-SERVICES - [0:0]",
    ":KUBE-NODEPORTS - [0:0]",
    ":KUBE-POSTROUTING - [0:0]",
    ":KUBE-MARK-MASQ - [0:0]",
  ];
  const rules = [
    "-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000",
    "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
    "-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000",
    "-A KUBE-POSTROUTING -j MASQUERADE --random-fully",
  ];
  const dispatch: string[] = [];
  for (let i = 0; i < n; i++) {
    const h = i.toString(36).padStart(16, "0").toUpperCase();
    const svcChain = `KUBE-SVC-${h}`;
    const cip = ipOf(10, i);
    chains.push(`:${svcChain} - [0:0]`);
    dispatch.push(
      `-A KUBE-SERVICES -d ${cip}/32 -p tcp -m comment --comment "bench/svc-${i}:http cluster IP" -m tcp --dport 80 -j ${svcChain}`,
    );
    rules.push(
      `-A ${svcChain} ! -s 10.0.0.0/8 -d ${cip}/32 -p tcp -m comment --comment "bench/svc-${i}:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
    );
    [ipOf(11, i), ipOf(12, i)].forEach((ip, e) => {
      const sep = `KUBE-SEP-${h.slice(0, 15)}${e}`;
      chains.push(`:${sep} - [0:0]`);
      rules.push(
        `-A ${svcChain} -m comment --comment "bench/svc-${i}:http -> ${ip}:8080" ${e === 0 ? "-m statistic --mode random --probability 0.50000000000 " : ""}-j ${sep}`,
      );
      rules.push(`-A ${sep} -s ${ip}/32 -m comment --comment "bench/svc-${i}:http" -j KUBE-MARK-MASQ`);
      rules.push(
        `-A ${sep} -p tcp -m comment --comment "bench/svc-${i}:http" -m tcp -j DNAT --to-destination ${ip}:8080`,
      );
    });
  }
  dispatch.push("-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS");
  return `*nat\n${[...chains, ...dispatch, ...rules].join("\n")}\nCOMMIT\n`;
}

/** Time to run one `iptables-restore` (the whole table, as upstream without partial restores). */
function timeRestore(ns: string, variant: Variant, family: IpFamily, text: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const argv = ["netns", "exec", ns, binary(family, variant, "restore"), "-w", "5", "--noflush"];
    const child = spawn("ip", argv, { stdio: ["pipe", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (b: Buffer) => {
      stderr += b.toString();
    });
    child.on("close", (code) =>
      code === 0 ? resolve(performance.now() - start) : reject(new Error(`restore failed: ${stderr}`)),
    );
    child.stdin.end(text);
  });
}

const fmt = (ms: number) => `${ms.toFixed(1)} ms`;

async function measure(variant: Variant, n: number): Promise<string[][]> {
  const rows: string[][] = [];
  const ours = openBenchNetns(`ipt-${variant}-${n}-kpng`);
  if (!ours) return rows;
  try {
    ours.runner.close();
    const runner = new ExecIptablesRunner(variant, { prefix: ["ip", "netns", "exec", ours.name] });
    const backend = new IptablesBackend({ runner, families: [CFG], log: silentLogger });
    const services = Array.from({ length: n }, (_, i) => svc(i));
    let current = stateOf(services, 1);
    const t0 = performance.now();
    await backend.sync(current);
    const cold = performance.now() - t0;
    const latencies: number[] = [];
    for (let k = 0; k < CHANGES; k++) {
      const i = (k * 97) % n;
      const next = new Map(current.services);
      next.set(`bench/svc-${i}`, svc(i, (k % 2) + 1));
      current = { node: "bench", revision: k + 2, services: next, serviceCIDRs: [] };
      const t = performance.now();
      const report = await backend.sync(current);
      if (report.full) throw new Error("expected a partial sync");
      latencies.push(performance.now() - t);
    }
    rows.push([`${variant} ${n / 1000}k cold start`, fmt(cold)]);
    rows.push([`${variant} ${n / 1000}k one endpoint change p50`, fmt(quantile(latencies, 0.5))]);
    rows.push([`${variant} ${n / 1000}k one endpoint change p99`, fmt(quantile(latencies, 0.99))]);
  } finally {
    ours.close();
  }
  const up = openBenchNetns(`ipt-${variant}-${n}-up`);
  if (!up) return rows;
  try {
    up.runner.close();
    const text = upstreamShaped(n);
    const cold = await timeRestore(up.name, variant, "ipv4", text);
    // Without partial restores, every change is this: the whole table again, over a loaded one.
    const again: number[] = [];
    for (let k = 0; k < 5; k++) again.push(await timeRestore(up.name, variant, "ipv4", text));
    rows[0]?.push(fmt(cold));
    rows[1]?.push(fmt(quantile(again, 0.5)));
    rows[2]?.push(fmt(quantile(again, 0.99)));
  } finally {
    up.close();
  }
  return rows;
}

async function main(): Promise<void> {
  const rows: string[][] = [];
  for (const variant of VARIANTS) {
    for (const n of SIZES) {
      rows.push(...(await measure(variant, n)));
      console.log(`  done ${variant} ${n}`);
    }
  }
  const header = ["scenario", "kpng", "upstream-shaped full restore", "ratio"];
  const table = rows.map((r) => [
    ...r,
    `${(Number.parseFloat(r[2] ?? "") / Number.parseFloat(r[1] ?? "")).toFixed(1)}x`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((r) => (r[i] ?? "").length)));
  for (const r of [header, ...table]) console.log(r.map((c, i) => c.padEnd(widths[i] ?? 0)).join("  "));
}

if (import.meta.main) await main();
