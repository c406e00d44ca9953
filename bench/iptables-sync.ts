// iptables backend programming time, with the real iptables-restore in a private network
// namespace, for both variants (iptables-nft and iptables-legacy):
//   - cold start of 1k and 10k ClusterIP services with 2 endpoints each;
//   - latency of one endpoint change (p50/p99 over 100 changes);
// each beside an upstream-shaped ruleset (kube-proxy's iptables mode: a chain per service and per
// endpoint, `statistic` probabilities, one KUBE-SERVICES rule per service) loaded by one
// `iptables-restore` of the filter and nat tables, generated in the same run (its cold start also
// counts kube-proxy's jump setup and nat read before that restore). Needs root.
//   node bench/iptables-sync.ts [--sizes=1000,10000] [--variants=nft,legacy] [--changes=100] [--quick]
// --quick: 1k services, 20 changes.

import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import type { FamilySettings } from "../src/backend-core/family-settings.ts";
import { IptablesBackend } from "../src/backends/iptables/backend.ts";
import { binary, ExecIptablesRunner, type Variant } from "../src/backends/iptables/runner.ts";
import type { IPFamily } from "../src/model/kube.ts";
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
const UPSTREAM_BUDGET_MS = 60_000;

const CFG: FamilySettings = {
  family: "IPv4",
  nodePortCIDRs: ["192.0.2.1/32"],
  podCIDRs: ["10.0.0.0/8"],
  masqueradeAll: false,
  nodeIPs: ["192.0.2.1"],
};

/** Chain-name hashes as kube-proxy makes them: the first 16 base32 characters of a sha256. */
function base32Hash(text: string): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = "";
  for (const b of createHash("sha256").update(text).digest().subarray(0, 10))
    bits += b.toString(2).padStart(8, "0");
  let out = "";
  for (let i = 0; i < 80; i += 5) out += alphabet[Number.parseInt(bits.slice(i, i + 5), 2)];
  return out;
}

/** A seeded permutation of 0..n-1 (mulberry32 + Fisher-Yates). */
function shuffled(n: number, seed: number): number[] {
  let t = seed >>> 0;
  const rand = () => {
    t = (t + 0x6d2b79f5) >>> 0;
    let r = Math.imul(t ^ (t >>> 15), 1 | t);
    r ^= r + Math.imul(r ^ (r >>> 7), 61 | r);
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [order[i], order[j]] = [order[j] as number, order[i] as number];
  }
  return order;
}

/**
 * What kube-proxy's iptables mode restores on a full sync of these services: the filter and nat
 * tables in one input, in its rule forms. Faithful in what costs: services come in a random order
 * (kube-proxy walks a Go map, so chain lines and rules are in random order, different each sync);
 * above 1000 endpoints ("large cluster mode", both sizes here) the endpoint chains' rules and the
 * service-to-endpoint jumps carry no comment; the dispatch and masquerade rules always do.
 */
export function upstreamShaped(n: number, seed = 1): string {
  const large = 2 * n > 1000;
  const note = (text: string) => (large ? "" : `-m comment --comment "${text}" `);
  const filter = [
    "*filter",
    ":KUBE-SERVICES - [0:0]",
    ":KUBE-EXTERNAL-SERVICES - [0:0]",
    ":KUBE-FORWARD - [0:0]",
    ":KUBE-NODEPORTS - [0:0]",
    ":KUBE-PROXY-FIREWALL - [0:0]",
    ":KUBE-FIREWALL - [0:0]",
    '-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP',
    "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP",
    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT',
    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
    "COMMIT",
  ];
  const chains = [
    ":KUBE-SERVICES - [0:0]",
    ":KUBE-NODEPORTS - [0:0]",
    ":KUBE-POSTROUTING - [0:0]",
    ":KUBE-MARK-MASQ - [0:0]",
  ];
  const rules = [
    "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
    "-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000",
    '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
    "-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000",
  ];
  for (const i of shuffled(n, seed)) {
    const svcChain = `KUBE-SVC-${base32Hash(`bench/svc-${i}:http`)}`;
    const cip = ipOf(10, i);
    const name = `bench/svc-${i}:http`;
    const match = `-m comment --comment "${name} cluster IP" -m tcp -p tcp -d ${cip} --dport 80`;
    chains.push(`:${svcChain} - [0:0]`);
    rules.push(`-A KUBE-SERVICES ${match} -j ${svcChain}`);
    rules.push(`-A ${svcChain} ${match} ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ`);
    const eps = [ipOf(11, i), ipOf(12, i)];
    const seps = eps.map((ip) => `KUBE-SEP-${base32Hash(`bench/svc-${i}:http${ip}:8080`)}`);
    eps.forEach((ip, e) => {
      const pick = e === 0 ? "-m statistic --mode random --probability 0.5000000000 " : "";
      rules.push(`-A ${svcChain} ${note(`${name} -> ${ip}:8080`)}${pick}-j ${seps[e]}`);
    });
    eps.forEach((ip, e) => {
      chains.push(`:${seps[e]} - [0:0]`);
      rules.push(`-A ${seps[e]} ${note(name)}-s ${ip} -j KUBE-MARK-MASQ`);
      rules.push(`-A ${seps[e]} ${note(name)}-m tcp -p tcp -j DNAT --to-destination ${ip}:8080`);
    });
  }
  rules.push(
    '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
  );
  return `${[...filter, "*nat", ...chains, ...rules, "COMMIT"].join("\n")}\n`;
}

/**
 * What kube-proxy runs before its first restore: for each jump from a built-in chain, `iptables
 * -N` (ensure the chain) and `-C` (check the rule; absent at first), then `-I`; and an
 * `iptables-save -t nat` (it reads the nat table to find stale chains).
 */
const UPSTREAM_JUMPS: readonly (readonly string[])[] = [
  ["filter", "KUBE-EXTERNAL-SERVICES", "INPUT", "kubernetes externally-visible service portals", "NEW"],
  ["filter", "KUBE-EXTERNAL-SERVICES", "FORWARD", "kubernetes externally-visible service portals", "NEW"],
  ["filter", "KUBE-NODEPORTS", "INPUT", "kubernetes health check service ports", ""],
  ["filter", "KUBE-SERVICES", "FORWARD", "kubernetes service portals", "NEW"],
  ["filter", "KUBE-SERVICES", "OUTPUT", "kubernetes service portals", "NEW"],
  ["filter", "KUBE-FORWARD", "FORWARD", "kubernetes forwarding rules", ""],
  ["filter", "KUBE-PROXY-FIREWALL", "INPUT", "kubernetes load balancer firewall", "NEW"],
  ["filter", "KUBE-PROXY-FIREWALL", "OUTPUT", "kubernetes load balancer firewall", "NEW"],
  ["filter", "KUBE-PROXY-FIREWALL", "FORWARD", "kubernetes load balancer firewall", "NEW"],
  ["nat", "KUBE-SERVICES", "OUTPUT", "kubernetes service portals", ""],
  ["nat", "KUBE-SERVICES", "PREROUTING", "kubernetes service portals", ""],
  ["nat", "KUBE-POSTROUTING", "POSTROUTING", "kubernetes postrouting rules", ""],
];

async function upstreamPrelude(ns: string, variant: Variant): Promise<void> {
  const ipt = binary("IPv4", variant, "");
  for (const [table = "", chain = "", from = "", comment = "", state = ""] of UPSTREAM_JUMPS) {
    const rule = [
      ...(state ? ["-m", "conntrack", "--ctstate", state] : []),
      ...["-m", "comment", "--comment", comment, "-j", chain],
    ];
    await run(ns, [ipt, "-w", "5", "-t", table, "-N", chain], true);
    if ((await run(ns, [ipt, "-w", "5", "-t", table, "-C", from, ...rule], true)) !== 0)
      await run(ns, [ipt, "-w", "5", "-t", table, "-I", from, ...rule]);
  }
  await run(ns, [binary("IPv4", variant, "save"), "-t", "nat"]);
}

function run(ns: string, argv: readonly string[], mayFail = false): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn("ip", ["netns", "exec", ns, ...argv], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (b: Buffer) => {
      stderr += b.toString();
    });
    child.on("close", (code) =>
      code === 0 || mayFail ? resolve(code ?? 1) : reject(new Error(`${argv.join(" ")}: ${stderr}`)),
    );
  });
}

/** Time to run one `iptables-restore` (the whole table, as upstream without partial restores). */
function timeRestore(ns: string, variant: Variant, family: IPFamily, text: string): Promise<number> {
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
      current = { node: "bench", revision: k + 2, services: next, serviceCIDRs: { IPv4: [], IPv6: [] } };
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
    const t0 = performance.now();
    await upstreamPrelude(up.name, variant);
    const prelude = performance.now() - t0;
    const cold = prelude + (await timeRestore(up.name, variant, "IPv4", upstreamShaped(n)));
    // Without partial restores, every change is this: the whole input again (services in a new
    // random order), over the loaded tables.
    // Five runs, or fewer when they are slow (iptables-nft takes minutes at 10k): at least one,
    // and no new one after UPSTREAM_BUDGET_MS.
    const again: number[] = [];
    const started = performance.now();
    while (again.length < 5 && (again.length === 0 || performance.now() - started < UPSTREAM_BUDGET_MS))
      again.push(await timeRestore(up.name, variant, "IPv4", upstreamShaped(n, again.length + 2)));
    if (again.length < 5) for (const r of rows.slice(1, 3)) r[0] += ` (upstream: ${again.length} runs)`;
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
