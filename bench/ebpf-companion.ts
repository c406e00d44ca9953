// The nft rules to-ebpf runs beside its programs (traffic from other machines), against to-nft's
// full ruleset for the same Services: the cold-start text's size (bytes, statements, elements)
// and `nft -f` of it in a fresh network namespace (wall, CPU user+sys, peak RSS of nft, from
// /usr/bin/time). The Services mix ClusterIP, NodePort and NodePort eTP Local; one in ten has an
// endpoint on this node (hairpin elements). IPv4 table only. Needs root.
//   node --expose-gc bench/ebpf-companion.ts [--sizes=10000,100000] [--quick] [--no-apply]

import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { NftBackend } from "../src/backends/nft/backend.ts";
import type { TableConfig } from "../src/backends/nft/fragment.ts";
import type { NftRunner } from "../src/backends/nft/runner.ts";
import { type LocalService, withFamilyEndpoints } from "../src/model/local.ts";
import { silentLogger } from "../src/observability/log.ts";
import { BENCH_TABLE } from "./lib/nft-netns.ts";
import { svc } from "./lib/services.ts";
import { sizesFlag, table } from "./lib/table.ts";

const SIZES = sizesFlag([10_000, 100_000]);
const APPLY = !process.argv.includes("--no-apply");
const ENDPOINTS = 10;

const COMPANION: TableConfig = { ...BENCH_TABLE, socketBalanced: true };

/** Service i: one in ten NodePort, one in ten NodePort eTP Local, the rest ClusterIP. */
function mixed(i: number): LocalService {
  const base = svc(i, 0, ENDPOINTS);
  const kind = i % 10;
  const [port] = base.ports;
  if (port === undefined) throw new Error("bench service without a port");
  const eps = port.internalEndpoints.map((ep, e) => (e === 0 && i % 10 === 3 ? { ...ep, local: true } : ep));
  const etpLocal = kind === 2;
  return {
    ...base,
    type: kind === 1 || etpLocal ? "NodePort" : "ClusterIP",
    externalTrafficPolicy: etpLocal ? "Local" : "Cluster",
    ports: [
      withFamilyEndpoints({
        ...port,
        nodePort: kind === 1 || etpLocal ? 30000 + (i % 2768) : 0,
        internalEndpoints: eps,
        // eTP Local: only the endpoint on this node serves external traffic.
        externalEndpoints: etpLocal ? [{ ...eps[0]!, local: true }] : eps,
      }),
    ],
  };
}

/** Keeps every transaction's text. */
class TextRunner implements NftRunner {
  readonly texts: string[] = [];
  async run(text: string): Promise<void> {
    this.texts.push(text);
  }
  async check(): Promise<void> {}
  async list(): Promise<Buffer | undefined> {
    return undefined;
  }
}

async function coldStartText(cfg: TableConfig, services: ReadonlyMap<string, LocalService>): Promise<string> {
  const runner = new TextRunner();
  const backend = new NftBackend({ runner, tables: [cfg], log: silentLogger });
  await backend.sync({ node: "bench", revision: 1, services, serviceCIDRs: { IPv4: [], IPv6: [] } });
  return runner.texts.join("");
}

interface Applied {
  readonly wallS: number;
  readonly cpuS: number;
  readonly rssMiB: number;
}

function applyInFreshNetns(text: string, dir: string): Applied {
  const file = join(dir, "ruleset.nft");
  writeFileSync(file, text);
  const ns = `kpng-companion-${process.pid}`;
  const add = spawnSync("ip", ["netns", "add", ns]);
  if (add.status !== 0) throw new Error(`ip netns add: ${add.stderr.toString()}`);
  try {
    const r = spawnSync(
      "/usr/bin/time",
      ["-f", "%e %U %S %M", "ip", "netns", "exec", ns, "nft", "-f", file],
      { maxBuffer: 1 << 26 },
    );
    const lines = r.stderr.toString().trim().split("\n");
    if (r.status !== 0) throw new Error(`nft -f failed: ${lines.slice(0, 5).join("\n")}`);
    const [wall, user, sys, rssKiB] = (lines.at(-1) ?? "").split(" ").map(Number);
    return { wallS: wall ?? 0, cpuS: (user ?? 0) + (sys ?? 0), rssMiB: (rssKiB ?? 0) / 1024 };
  } finally {
    spawnSync("ip", ["netns", "del", ns]);
  }
}

const count = (text: string, re: RegExp) => text.match(re)?.length ?? 0;

async function main(): Promise<void> {
  if (APPLY && process.getuid?.() !== 0) {
    console.log("ebpf-companion: applying needs root for network namespaces; run with --no-apply");
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), "kpng-bench-companion-"));
  const rows: string[][] = [];
  try {
    for (const n of SIZES) {
      const services = new Map(Array.from({ length: n }, (_, i) => [`bench/svc-${i}`, mixed(i)] as const));
      for (const [name, cfg] of [
        ["to-nft (all)", BENCH_TABLE],
        ["to-ebpf companion", COMPANION],
      ] as const) {
        let text = await coldStartText(cfg, services);
        const statements = count(text, /\n/g);
        // Each element of an `add element … { a, b }` counts: nft parses and commits each.
        const elements = count(text, /, /g) + count(text, /^add element/gm);
        const bytes = text.length;
        const applied = APPLY ? applyInFreshNetns(text, dir) : undefined;
        text = "";
        rows.push([
          `${n / 1000}k`,
          name,
          `${(bytes / 2 ** 20).toFixed(2)} MiB`,
          String(statements),
          String(elements),
          applied ? `${applied.wallS.toFixed(2)} s` : "-",
          applied ? `${applied.cpuS.toFixed(2)} s` : "-",
          applied ? `${applied.rssMiB.toFixed(0)} MiB` : "-",
        ]);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    table(
      ["services x10", "ruleset", "text", "statements", "elements", "nft -f wall", "nft CPU", "nft RSS"],
      rows,
    ),
  );
  console.log(
    `load average: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
}

await main();
