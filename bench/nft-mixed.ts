// One endpoint change at 10k services when some services keep chains of their own: a share of
// them use ClientIP affinity (a chain and a set per endpoint) and as many are NodePort services
// with eTP Local (three chains each); the rest are plain ClusterIP services. Prints p50/p99 of
// 100 changes of each kind. Real nft in a private network namespace; needs root.
//   node bench/nft-mixed.ts [--every=20] [--quick]   (one service in 20 has affinity, one in 20 eTP Local)
// --quick: 1k services, 20 changes of each kind.

import { NftBackend } from "../src/backends/nft/backend.ts";
import { type LocalEndpoint, type LocalService, withFamilyEndpoints } from "../src/model/local.ts";
import { silentLogger } from "../src/observability/log.ts";
import { BENCH_TABLE, ipOf, openBenchNetns, quantile } from "./lib/nft-netns.ts";
import { quick, table } from "./lib/table.ts";

const N = quick ? 1000 : 10_000;
const ROUNDS = quick ? 20 : 100;
const everyArg = process.argv.find((a) => a.startsWith("--every="));
const EVERY = everyArg ? Number(everyArg.slice("--every=".length)) : 20;
const KINDS = ["plain ClusterIP", "ClientIP affinity", "NodePort eTP Local"] as const;

function endpoint(ip: string, local: boolean): LocalEndpoint {
  return { ip, port: 8080, local, ready: true, serving: true, terminating: false };
}

/** Service i: i % EVERY == 0 has affinity, == 1 is NodePort eTP Local, the rest are plain. */
function svc(i: number, generation = 0): LocalService {
  const eps = [endpoint(ipOf(11, i), true), endpoint(ipOf(12 + generation, i), false)];
  const kind = i % EVERY;
  const etpLocal = kind === 1;
  return {
    namespace: "bench",
    name: `svc-${i}`,
    type: etpLocal ? "NodePort" : "ClusterIP",
    families: [
      { family: "IPv4", clusterIP: ipOf(10, i), externalIPs: [], loadBalancerIPs: [], sourceRanges: [] },
    ],
    sessionAffinitySeconds: kind === 0 ? 10_800 : 0,
    internalTrafficPolicy: "Cluster",
    externalTrafficPolicy: etpLocal ? "Local" : "Cluster",
    healthCheckNodePort: 0,
    localReadyEndpoints: etpLocal ? 1 : 0,
    ports: [
      withFamilyEndpoints({
        name: "http",
        protocol: "TCP",
        port: 80,
        nodePort: etpLocal ? 30000 + (i % 2000) : 0,
        hasEndpoints: true,
        endpointFamilies: ["IPv4"],
        internalEndpoints: eps,
        externalEndpoints: etpLocal ? eps.slice(0, 1) : eps,
      }),
    ],
  };
}

async function main(): Promise<void> {
  const netns = openBenchNetns("nft-mixed");
  if (!netns) return;
  try {
    const backend = new NftBackend({
      runner: netns.runner,
      tables: [BENCH_TABLE],
      log: silentLogger,
    });
    let services = new Map(Array.from({ length: N }, (_, i) => [`bench/svc-${i}`, svc(i)]));
    await backend.sync({ node: "bench", revision: 1, services, serviceCIDRs: { IPv4: [], IPv6: [] } });
    await new Promise((r) => setTimeout(r, 1000)); // --min-sync-period after the cold start
    const latencies: number[][] = KINDS.map(() => []);
    for (let k = 0; k < ROUNDS * KINDS.length; k++) {
      const kind = k % KINDS.length;
      // A service of this kind: plain ones sit at i % EVERY == 2.
      const i = ((k * 97) % Math.floor(N / EVERY)) * EVERY + [2, 0, 1][kind]!;
      services = new Map(services);
      services.set(`bench/svc-${i}`, svc(i, (k % 2) + 1));
      const t0 = performance.now();
      await backend.sync({ node: "bench", revision: k + 2, services, serviceCIDRs: { IPv4: [], IPv6: [] } });
      latencies[kind]!.push(performance.now() - t0);
    }
    const share = `${(100 / EVERY).toFixed(1)}%`;
    console.log(`${N / 1000}k services, ${share} with affinity, ${share} NodePort eTP Local`);
    console.log(
      table(
        ["one endpoint change of", "changes", "p50 ms", "p99 ms"],
        KINDS.map((name, kind) => {
          const xs = latencies[kind]!;
          return [name, String(xs.length), quantile(xs, 0.5).toFixed(1), quantile(xs, 0.99).toFixed(1)];
        }),
      ),
    );
  } finally {
    netns.close();
  }
}

await main();
