// Conntrack cleanup at scale: 10k UDP services with 2 endpoints each and 100k UDP entries in a
// private namespace's table. Measures what cleanup adds to a sync (the diff; conntrack runs in
// the background) and how long until the stale entries are gone: when one endpoint leaves one
// service, when a full resync delivers every service as a new (equal) object, and when ten
// services lose an endpoint at once. Prints quantiles in ms.
//
//   node bench/conntrack-cleanup.ts [--rounds=N] [--quick]   (root: it creates a network namespace)
// --quick: 1k services, 3 rounds.

import { spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LocalService, LocalState } from "../src/model/local.ts";
import { ConntrackCleaner } from "../src/node/conntrack/cleaner.ts";
import { ExecConntrackRunner } from "../src/node/conntrack/runner.ts";
import { filterLine, staleFilters } from "../src/node/conntrack/stale.ts";
import { silentLogger } from "../src/observability/log.ts";
import { ipOf, openBenchNetns, quantile } from "./lib/nft-netns.ts";
import { clusterIPService } from "./lib/services.ts";
import { quick, table } from "./lib/table.ts";

const SERVICES = quick ? 1000 : 10_000;
const FLOWS_PER_SERVICE = 10;
const roundsArg = process.argv.find((a) => a.startsWith("--rounds="));
const ROUNDS = roundsArg ? Number(roundsArg.slice("--rounds=".length)) : quick ? 3 : 10;

function dns(i: number, endpointIPs: readonly string[]): LocalService {
  return clusterIPService({
    name: `dns-${i}`,
    clusterIP: ipOf(10, i),
    port: { name: "dns", protocol: "UDP", port: 53 },
    targetPort: 5353,
    endpointIPs,
  });
}

const both = (i: number) => [ipOf(11, 2 * i), ipOf(11, 2 * i + 1)];

function stateOf(services: Map<string, LocalService>, revision: number): LocalState {
  return { node: "bench", revision, services, serviceCIDRs: { IPv4: [], IPv6: [] } };
}

const ns = openBenchNetns("conntrack");
if (ns) {
  const file = join(tmpdir(), `kpng-bench-conntrack-${process.pid}`);
  try {
    const lines: string[] = [];
    for (let f = 0; f < SERVICES * FLOWS_PER_SERVICE; f++) {
      const s = Math.floor(f / FLOWS_PER_SERVICE);
      const client = ipOf(12, f);
      const ep = both(s)[f % 2];
      lines.push(
        `-I -p udp -s ${client} -d ${ipOf(10, s)} --sport 40000 --dport 53 -r ${ep} -q ${client} --reply-port-src 5353 --reply-port-dst 40000 -t 3600`,
      );
    }
    writeFileSync(file, `${lines.join("\n")}\n`);
    const ins = spawnSync("ip", ["netns", "exec", ns.name, "conntrack", "-R", file], { stdio: "ignore" });
    if (ins.status !== 0) throw new Error("conntrack -R (insert) failed");
    const count = spawnSync("ip", ["netns", "exec", ns.name, "conntrack", "-C"]).stdout.toString().trim();
    console.log(`conntrack entries in the table: ${count}`);

    const runner = new ExecConntrackRunner({
      command: ["ip", "netns", "exec", ns.name, "conntrack"],
      timeoutMs: 120_000,
    });
    const services = new Map<string, LocalService>();
    for (let i = 0; i < SERVICES; i++) services.set(`bench/dns-${i}`, dns(i, both(i)));
    const base = stateOf(services, 1);

    // One endpoint leaves one service (a different one each round). What the sync waits for is
    // the diff (cleanup() returns once the filters are queued); the entries are gone once the
    // background conntrack batch ends.
    const addedMs: number[] = [];
    const goneMs: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const i = r * 997;
      const cleaner = new ConntrackCleaner(runner, silentLogger);
      cleaner.cleanup(base);
      const next = new Map(services);
      next.set(`bench/dns-${i}`, dns(i, [both(i)[1]!]));
      const t0 = performance.now();
      cleaner.cleanup(stateOf(next, 2));
      const t1 = performance.now();
      await cleaner.idle();
      addedMs.push(t1 - t0);
      goneMs.push(performance.now() - t0);
    }
    const rows: string[][] = [];
    const q = (what: string, xs: number[]) =>
      rows.push([what, ...[0.5, 0.9, 0.99].map((p) => quantile(xs, p).toFixed(1))]);
    q("one endpoint leaves: added to the sync", addedMs);
    q("one endpoint leaves: stale entries gone after", goneMs);

    // A full resync: every service a new but equal object; no filter, no conntrack run.
    const fullMs: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const fresh = new Map<string, LocalService>();
      for (let i = 0; i < SERVICES; i++) fresh.set(`bench/dns-${i}`, dns(i, both(i)));
      const cleaner = new ConntrackCleaner(runner, silentLogger);
      cleaner.cleanup(base);
      const t0 = performance.now();
      if (cleaner.cleanup(stateOf(fresh, 2)) > 0) throw new Error("an equal state made filters");
      fullMs.push(performance.now() - t0);
    }
    q(`full resync (${SERVICES / 1000}k equal services, no conntrack run): added to the sync`, fullMs);
    console.log(table(["scenario", "p50 ms", "p90 ms", "p99 ms"], rows));

    // Ten services lose an endpoint in one sync: one batch, one table walk per filter line.
    const next = new Map(services);
    const mid = SERVICES / 2;
    for (let k = 0; k < 10; k++) next.set(`bench/dns-${mid + k}`, dns(mid + k, [both(mid + k)[0]!]));
    const t0 = performance.now();
    const filters = staleFilters(base, stateOf(next, 2));
    const got = await runner.deleteBatch(filters.map(filterLine));
    console.log(
      `10 services lose an endpoint: conntrack ${(performance.now() - t0).toFixed(0)} ms (${filters.length} filters, ${got} entries deleted)`,
    );
  } finally {
    rmSync(file, { force: true });
    ns.close();
  }
}
