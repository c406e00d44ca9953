// How long `kpng cleanup kube-proxy` takes on a node that kube-proxy's iptables mode served with
// N Services of 2 endpoints each (iptables-nft), in a private network namespace.
//   node bench/kube-proxy-cleanup.ts [N …] [--quick]      (default 1000 5000; --quick: 1000)

import { spawnSync } from "node:child_process";
import { removeKubeProxyLeftovers } from "../src/host/kube-proxy-leftovers/cleanup.ts";
import { type CommandRunner, ExecCommandRunner } from "../src/host/kube-proxy-leftovers/command.ts";
import { silentLogger } from "../src/observability/log.ts";
import { ipOf } from "./lib/nft-netns.ts";
import { positionalArgs, quick, table } from "./lib/table.ts";

function ruleset(services: number): string {
  const chains = ["KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ"];
  const rules = [
    '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
    "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
  ];
  for (let i = 0; i < services; i++) {
    const svc = `KUBE-SVC-${String(i).padStart(16, "0")}`;
    chains.push(svc);
    rules.push(`-A KUBE-SERVICES -d ${ipOf(10, i)}/32 -p tcp -m tcp --dport 80 -j ${svc}`);
    for (let e = 0; e < 2; e++) {
      const sep = `KUBE-SEP-${String(i * 2 + e).padStart(16, "0")}`;
      chains.push(sep);
      rules.push(
        e === 0 ? `-A ${svc} -m statistic --mode random --probability 0.5 -j ${sep}` : `-A ${svc} -j ${sep}`,
        `-A ${sep} -s ${ipOf(11, i * 2 + e)}/32 -j KUBE-MARK-MASQ`,
        `-A ${sep} -p tcp -m tcp -j DNAT --to-destination ${ipOf(11, i * 2 + e)}:8080`,
      );
    }
  }
  return ["*nat", ...chains.map((c) => `:${c} - [0:0]`), ...rules, "COMMIT", ""].join("\n");
}

class NetnsRunner implements CommandRunner {
  readonly #inner = new ExecCommandRunner(120_000);
  readonly #ns: string;
  constructor(ns: string) {
    this.#ns = ns;
  }
  run(argv: readonly string[], stdin?: string) {
    return this.#inner.run(["ip", "netns", "exec", this.#ns, ...argv], stdin);
  }
}

if (process.getuid?.() !== 0) {
  console.log("kube-proxy-cleanup: skipped (needs root for network namespaces)");
  process.exit(0);
}
const sizes = positionalArgs().map(Number);
const rows: string[][] = [];
for (const n of sizes.length > 0 ? sizes : quick ? [1000] : [1000, 5000]) {
  const ns = `kpng-kpcleanup-${process.pid}`;
  spawnSync("ip", ["netns", "add", ns]);
  try {
    const runner = new NetnsRunner(ns);
    const text = ruleset(n);
    const loadStart = performance.now();
    const loaded = await runner.run(["iptables-nft-restore", "--noflush"], text);
    if (loaded.code !== 0) throw new Error(`load: ${loaded.stderr}`);
    const loadMs = performance.now() - loadStart;
    const start = performance.now();
    const report = await removeKubeProxyLeftovers(runner, silentLogger);
    const ms = performance.now() - start;
    if (report.failures.length > 0) throw new Error(report.failures.join("; "));
    rows.push([
      String(n),
      String(report.iptablesChains.length),
      String(text.split("\n").length),
      ms.toFixed(0),
      loadMs.toFixed(0),
    ]);
  } finally {
    spawnSync("ip", ["netns", "del", ns]);
  }
}
console.log(table(["services", "chains", "lines", "cleanup ms", "loading them ms"], rows));
