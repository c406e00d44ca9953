// nft backend programming time, with the real nft in a private network namespace:
//   - cold start of 1k, 10k and 44k ClusterIP services with 2 endpoints each;
//   - latency of one endpoint change at the largest size up to 10k (p50/p99 over 100 changes);
// each beside `nft -f` loading a ruleset shaped like upstream kube-proxy's nftables mode (one
// chain per service and per endpoint, `numgen … vmap { … }`, the same dispatch maps, one
// transaction). The cold start also prints this process's CPU (user + system: the backend's
// planning and rendering, not nft's) and its peak RSS. Needs root.
//   node bench/nft-sync.ts [--quick] [--sizes=1000,10000] [--max-statements=N] [--no-upstream]
// KPNG_BENCH_TRACE=1 also prints each change's latency.

import { spawn, spawnSync } from "node:child_process";
import { NftBackend } from "../src/backends/nft/backend.ts";
import { silentLogger } from "../src/observability/log.ts";
import { BENCH_TABLE, ipOf, openBenchNetns, quantile } from "./lib/nft-netns.ts";
import { stateOf, svc } from "./lib/services.ts";

const quick = process.argv.includes("--quick");
const onlyArg = process.argv.find((a) => a.startsWith("--sizes="));
const SIZES = onlyArg
  ? onlyArg.slice("--sizes=".length).split(",").map(Number)
  : quick
    ? [1000]
    : [1000, 10_000, 44_000];
/** The size at which one endpoint change is measured. */
const CHANGE_AT = Math.max(...SIZES.filter((n) => n <= 10_000));
const CHANGE_ROUNDS = quick ? 20 : 100;
const maxArg = process.argv.find((a) => a.startsWith("--max-statements="));
const MAX_STATEMENTS = maxArg ? Number(maxArg.slice("--max-statements=".length)) : undefined;
const skipUpstream = process.argv.includes("--no-upstream");
/** The kube-proxy-shaped load is quadratic in the kernel; give up past this. */
const UPSTREAM_TIMEOUT_MS = 120_000;

/** A ruleset in the shape upstream kube-proxy writes (names and rules of the same form). */
function upstreamShaped(n: number): string {
  const t = "ip kube-proxy";
  const out = [
    `add table ${t}`,
    `add map ${t} service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }`,
    `add set ${t} cluster-ips { type ipv4_addr; }`,
    `add chain ${t} mark-for-masquerade`,
    `add rule ${t} mark-for-masquerade mark set mark or 0x4000`,
    `add chain ${t} services`,
    `add rule ${t} services ip daddr . meta l4proto . th dport vmap @service-ips`,
    `add chain ${t} nat-prerouting { type nat hook prerouting priority -100; policy accept; }`,
    `add rule ${t} nat-prerouting jump services`,
  ];
  const elements: string[] = [];
  const cips: string[] = [];
  for (let i = 0; i < n; i++) {
    const h = i.toString(36).padStart(8, "0").toUpperCase();
    const svcChain = `service-${h}-bench/svc-${i}/tcp/http`;
    const eps = [ipOf(11, i), ipOf(12, i)];
    const epChains = eps.map(
      (ip) => `endpoint-${h}${ip.replaceAll(".", "")}-bench/svc-${i}/tcp/http__${ip}/8080`,
    );
    eps.forEach((ip, e) => {
      out.push(`add chain ${t} ${epChains[e]}`);
      out.push(`add rule ${t} ${epChains[e]} ip saddr ${ip} jump mark-for-masquerade`);
      out.push(`add rule ${t} ${epChains[e]} meta l4proto tcp dnat to ${ip}:8080`);
    });
    out.push(`add chain ${t} ${svcChain}`);
    out.push(
      `add rule ${t} ${svcChain} ip daddr ${ipOf(10, i)} tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade`,
    );
    out.push(
      `add rule ${t} ${svcChain} numgen random mod 2 vmap { 0 : goto ${epChains[0]}, 1 : goto ${epChains[1]} }`,
    );
    elements.push(`${ipOf(10, i)} . tcp . 80 : goto ${svcChain}`);
    cips.push(ipOf(10, i));
  }
  out.push(`add element ${t} service-ips { ${elements.join(", ")} }`);
  out.push(`add element ${t} cluster-ips { ${cips.join(", ")} }`);
  return `${out.join("\n")}\n`;
}

/** Time to run `nft -f -` with `text` in namespace `ns`, or undefined past the timeout. */
function timeNft(ns: string, text: string, timeoutMs: number): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const child = spawn("ip", ["netns", "exec", ns, "nft", "-f", "-"], { stdio: ["pipe", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (b: Buffer) => {
      stderr += b.toString();
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (signal === "SIGKILL") resolve(undefined);
      else if (code !== 0) reject(new Error(`nft failed: ${stderr}`));
      else resolve(performance.now() - start);
    });
    child.stdin.end(text);
  });
}

function nftSync(ns: string, args: string[]): void {
  spawnSync("ip", ["netns", "exec", ns, "nft", ...args], { stdio: "ignore" });
}

const fmt = (ms: number | undefined) =>
  ms === undefined ? `>${UPSTREAM_TIMEOUT_MS / 1000} s` : `${ms.toFixed(1)} ms`;

async function main(): Promise<void> {
  const netns = openBenchNetns("nft-sync");
  if (!netns) return;
  const { name: ns, runner } = netns;
  const rows: string[][] = [];
  try {
    for (const n of SIZES) {
      const services = Array.from({ length: n }, (_, i) => svc(i));
      const backend = new NftBackend({
        runner,
        tables: [BENCH_TABLE],
        log: silentLogger,
        ...(MAX_STATEMENTS ? { maxStatementsPerTransaction: MAX_STATEMENTS } : {}),
      });
      let current = stateOf(services, 1);
      global.gc?.();
      const cpu = process.cpuUsage();
      const start = performance.now();
      const report = await backend.sync(current);
      const ours = performance.now() - start;
      const used = process.cpuUsage(cpu);
      const cpuS = ((used.user + used.system) / 1e6).toFixed(2);
      // Peak so far: the largest size runs last, so this is its own peak.
      const rssMiB = (process.resourceUsage().maxRSS / 1024).toFixed(0);
      if (n === CHANGE_AT) {
        // The backend never syncs again sooner than --min-sync-period (1 s) after the cold start.
        await new Promise((r) => setTimeout(r, 1000));
        const latencies: number[] = [];
        for (let k = 0; k < CHANGE_ROUNDS; k++) {
          const i = (k * 97) % n;
          // As the brain builds a new state: a copy of the last map with the changed service.
          const services = new Map(current.services);
          services.set(`bench/svc-${i}`, svc(i, (k % 2) + 1));
          current = { node: "bench", revision: k + 2, services, serviceCIDRs: { IPv4: [], IPv6: [] } };
          const t0 = performance.now();
          await backend.sync(current);
          latencies.push(performance.now() - t0);
          if (process.env.KPNG_BENCH_TRACE) console.log(k, (performance.now() - t0).toFixed(1));
        }
        const upstreamChange = skipUpstream ? [] : await upstreamChangeLatencies(ns, n);
        rows.push([
          `${n / 1000}k: one endpoint change p50`,
          fmt(quantile(latencies, 0.5)),
          fmt(quantile(upstreamChange, 0.5)),
        ]);
        rows.push([
          `${n / 1000}k: one endpoint change p99`,
          fmt(quantile(latencies, 0.99)),
          fmt(quantile(upstreamChange, 0.99)),
        ]);
      }
      nftSync(ns, ["delete", "table", "ip", "kpng"]);
      const upstream = skipUpstream ? Number.NaN : await timeNft(ns, upstreamShaped(n), UPSTREAM_TIMEOUT_MS);
      nftSync(ns, ["delete", "table", "ip", "kube-proxy"]);
      rows.unshift([
        `cold start ${n / 1000}k services (${report.transactions} tx; this process: ${cpuS} s CPU, peak RSS ${rssMiB} MiB)`,
        fmt(ours),
        fmt(upstream),
      ]);
      console.log(`  done ${n}`);
    }
  } finally {
    netns.close();
  }
  // --no-upstream: kpng's column only.
  const header = skipUpstream
    ? ["scenario", "kpng"]
    : ["scenario", "kpng", "kube-proxy-shaped nft -f", "ratio"];
  const table = rows.map((r) => {
    if (skipUpstream) return r.slice(0, 2);
    const a = Number.parseFloat(r[1] ?? "");
    const timedOut = r[2]?.startsWith(">") === true;
    const b = timedOut ? UPSTREAM_TIMEOUT_MS : Number.parseFloat(r[2] ?? "");
    const ratio = `${timedOut ? ">" : ""}${(b / a).toFixed(1)}x`;
    return [...r, ratio];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((r) => (r[i] ?? "").length)));
  for (const r of [header, ...table]) console.log(r.map((c, i) => c.padEnd(widths[i] ?? 0)).join("  "));
}

/** One endpoint change as upstream applies it: new endpoint chain, rewritten service chain. */
async function upstreamChangeLatencies(ns: string, n: number): Promise<number[]> {
  await timeNft(ns, upstreamShaped(n), UPSTREAM_TIMEOUT_MS);
  const t = "ip kube-proxy";
  const out: number[] = [];
  for (let k = 0; k < CHANGE_ROUNDS; k++) {
    const i = (k * 97) % n;
    const h = i.toString(36).padStart(8, "0").toUpperCase();
    const svcChain = `service-${h}-bench/svc-${i}/tcp/http`;
    const ep = `endpoint-${h}-gen${k}-bench/svc-${i}/tcp/http__${ipOf(13, i)}/8080`;
    const text = [
      `add chain ${t} ${ep}`,
      `add rule ${t} ${ep} ip saddr ${ipOf(13, i)} jump mark-for-masquerade`,
      `add rule ${t} ${ep} meta l4proto tcp dnat to ${ipOf(13, i)}:8080`,
      `flush chain ${t} ${svcChain}`,
      `add rule ${t} ${svcChain} numgen random mod 1 vmap { 0 : goto ${ep} }`,
    ].join("\n");
    const ms = await timeNft(ns, `${text}\n`, 10_000);
    if (ms !== undefined) out.push(ms);
  }
  nftSync(ns, ["delete", "table", "ip", "kube-proxy"]);
  return out;
}

await main();
