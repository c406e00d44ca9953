// What the nft benchmarks share: a private network namespace with the runner the plugin uses in
// it, synthetic addresses, and quantiles. Lives in lib/ so that `npm run bench` does not run it.

import { spawnSync } from "node:child_process";
import type { TableConfig } from "../../src/backends/nft/fragment.ts";
import { InteractiveNftRunner } from "../../src/backends/nft/interactive-runner.ts";
import { ExecNftRunner } from "../../src/backends/nft/runner.ts";

export interface BenchNetns {
  readonly name: string;
  /** As the plugin runs it: small transactions through one `nft -i`, big ones through `nft -f -`. */
  readonly runner: InteractiveNftRunner;
  close(): void;
}

/** Creates the namespace, or says why it cannot and returns undefined (it needs root). */
export function openBenchNetns(bench: string): BenchNetns | undefined {
  if (process.getuid?.() !== 0) {
    console.log(`${bench}: skipped (needs root for network namespaces)`);
    return undefined;
  }
  const name = `kpng-${bench}-${process.pid}`;
  const add = spawnSync("ip", ["netns", "add", name]);
  if (add.status !== 0) throw new Error(`ip netns add: ${add.stderr.toString()}`);
  const command = ["ip", "netns", "exec", name, "nft"];
  const runner = new InteractiveNftRunner({ command, fallback: new ExecNftRunner(command) });
  return {
    name,
    runner,
    close() {
      runner.close();
      spawnSync("ip", ["netns", "del", name]);
    },
  };
}

/** The i-th address of a synthetic /8: `base.x.y.z`. */
export function ipOf(base: number, i: number): string {
  return `${base}.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

export function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
}

/** The IPv4 table every nft benchmark programs: NodePorts on 192.0.2.1, pods in 10.0.0.0/8. */
export const BENCH_TABLE: TableConfig = {
  family: "ip",
  table: "kpng",
  nodePortCIDRs: ["192.0.2.1/32"],
  podCIDRs: ["10.0.0.0/8"],
  masqueradeAll: false,
  nodeIPs: ["192.0.2.1"],
};
