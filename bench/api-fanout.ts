// Fan-out cost of the watch API on the real brain: a ClusterStore fed with validated Services,
// EndpointSlices and Nodes (10 endpoints per service, spread over the nodes, three zones), the
// ApiServer's local feeds made as `kpng … to-api` makes them, and one node client per node, each
// on its own HTTP/2 connection, spread over several client processes. Clients decode every
// OpItem they get. Then one endpoint change at a time, which every node's state takes. CPU time
// and memory printed are the server process's alone (brain + API), which runs as bin/kpng runs
// kpng (malloc on huge pages, bench/lib/as-kpng-runs.ts).
//
//   node --expose-gc bench/api-fanout.ts [--quick] [--clients 1000] [--services 10000]
//        [--processes 4] [--changes 5] [--stalled 10] [--profile DIR] [--client-window BYTES]
//
// --quick is 100 clients × 1,000 services. --stalled K adds K more streams (for nodes that
// already have a reading client) that ask once and never read: what the server holds for them is
// printed after the changes. --profile writes the server's CPU profiles of the initial full state
// and of the changes to DIR (initial.cpuprofile, changes.cpuprofile). Clients offer the HTTP/2
// flow-control window of kpng's client library (WATCH_FLOW_CONTROL_WINDOW); --client-window 65535
// measures clients that keep HTTP/2's default.

import { fork } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import { Session } from "node:inspector/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { OpItem, WatchReq } from "../src/api/gen/api/localv1/api.ts";
import { ApiServer } from "../src/api/server.ts";
import { localStateFeed } from "../src/brain/local-state-feed.ts";
import { ClusterStore } from "../src/brain/store.ts";
import { WATCH_FLOW_CONTROL_WINDOW } from "../src/client/watch.ts";
import { silentLogger } from "../src/observability/log.ts";
import { runAsKpngRuns } from "./lib/as-kpng-runs.ts";
import { benchNode, benchService, benchSlice, policyOf } from "./lib/brain-cluster.ts";

const ENDPOINTS = 10;

/** What a client process tells the server process after each Sync, or when its stream fails. */
interface SyncReport {
  readonly error?: string;
  readonly client: number;
  readonly syncs: number;
  /** OpItems and bytes of the change set this Sync ended. */
  readonly ops: number;
  readonly bytes: number;
}

interface ClientSpec {
  readonly target: string;
  readonly first: number;
  readonly count: number;
  /** Streams that ask once and never read, for nodes first … first+stalled-1. */
  readonly stalled: number;
  /** The HTTP/2 flow-control window the clients offer (bytes). */
  readonly window: number;
}

function request(node: string): Buffer {
  const body = WatchReq.encode({ NodeName: node, InstanceID: "", Revision: 0 }).finish();
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  out.set(body, 5);
  return out;
}

function openStream(target: string, window: number): http2.ClientHttp2Stream {
  // The flow-control window of kpng's client library, per stream and per connection.
  const session = http2.connect(`http://${target}`, { settings: { initialWindowSize: window } });
  session.on("remoteSettings", () => {
    if (window > 65_535) session.setLocalWindowSize(window);
  });
  session.on("error", () => {});
  const stream = session.request({
    ":method": "POST",
    ":path": "/localv1.Sets/Watch",
    "content-type": "application/grpc",
    te: "trailers",
  });
  return stream;
}

/** One node client: a raw gRPC stream (own connection) that decodes every message. */
function runClient(target: string, n: number, window: number): void {
  const req = request(`node-${n}`);
  const stream = openStream(target, window);
  const fail = (error: string) =>
    process.send?.({ client: n, syncs, ops, bytes, error } satisfies SyncReport);
  stream.on("error", (err) => fail(err.message));
  stream.on("close", () => fail(`stream closed (code ${stream.rstCode})`));
  let pending: Buffer = Buffer.alloc(0);
  let ops = 0;
  let bytes = 0;
  let syncs = 0;
  stream.on("data", (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    let at = 0;
    while (pending.length - at >= 5) {
      const length = pending.readUInt32BE(at + 1);
      if (pending.length - at < 5 + length) break;
      const op = OpItem.decode(pending.subarray(at + 5, at + 5 + length)).Op;
      at += 5 + length;
      bytes += 5 + length;
      ops++;
      if (op?.$case !== "Sync") continue;
      syncs++;
      process.send?.({ client: n, syncs, ops, bytes } satisfies SyncReport);
      ops = 0;
      bytes = 0;
      stream.write(req);
    }
    pending = pending.subarray(at);
  });
  stream.write(req);
}

function runClients(spec: ClientSpec): void {
  for (let n = spec.first; n < spec.first + spec.count; n++) runClient(spec.target, n, spec.window);
  for (let n = spec.first; n < spec.first + spec.stalled; n++) {
    const stream = openStream(spec.target, spec.window);
    stream.on("error", () => {});
    stream.pause();
    stream.write(request(`node-${n}`));
  }
}

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    clients: { type: "string" },
    services: { type: "string" },
    processes: { type: "string" },
    changes: { type: "string", default: "5" },
    stalled: { type: "string", default: "0" },
    profile: { type: "string" },
    "client-window": { type: "string" },
  },
});

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

const cpuMs = (used: NodeJS.CpuUsage) => (used.user + used.system) / 1000;
const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(0);

async function runServer(o: {
  clients: number;
  services: number;
  processes: number;
  changes: number;
  stalled: number;
  profile: string | undefined;
  window: number;
}): Promise<void> {
  const profiler = o.profile === undefined ? undefined : new Session();
  profiler?.connect();
  const startProfile = async () => {
    await profiler?.post("Profiler.enable");
    await profiler?.post("Profiler.start");
  };
  const stopProfile = async (name: string) => {
    if (profiler === undefined || o.profile === undefined) return;
    const { profile } = await profiler.post("Profiler.stop");
    mkdirSync(o.profile, { recursive: true });
    writeFileSync(join(o.profile, `${name}.cpuprofile`), JSON.stringify(profile));
  };
  const store = new ClusterStore();
  for (let n = 0; n < o.clients; n++) store.upsert(benchNode(n));
  for (let i = 0; i < o.services; i++) {
    store.upsert(benchService(i));
    store.upsert(benchSlice(i, o.clients, ENDPOINTS));
  }
  store.synced();
  store.flush();
  const server = new ApiServer({
    listen: ["tcp://127.0.0.1:0"],
    localFeed: (nodeName) => localStateFeed(store, nodeName),
    log: silentLogger,
    // A client process here plays 250 nodes and may lag a minute behind its reads while they
    // decode the first full state; a real node's client answers pings in time.
    keepaliveTimeoutMs: 300_000,
  });
  await server.start();

  const latest = new Map<number, SyncReport>();
  let waiting: { syncs: number; resolve: () => void } | undefined;
  const check = () => {
    if (waiting === undefined || latest.size < o.clients) return;
    for (const r of latest.values()) if (r.syncs < waiting.syncs) return;
    waiting.resolve();
    waiting = undefined;
  };
  let failures = 0;
  const allSynced = async (syncs: number) => {
    const progress = setInterval(() => {
      const done = [...latest.values()].filter((r) => r.syncs >= syncs).length;
      console.error(`… ${done}/${o.clients} clients have change set ${syncs}, ${failures} stream failures`);
    }, 30_000);
    await new Promise<void>((resolve) => {
      waiting = { syncs, resolve };
      check();
    });
    clearInterval(progress);
  };

  global.gc?.();
  await startProfile();
  const cpu0 = process.cpuUsage();
  const faults0 = process.resourceUsage().minorPageFault;
  const t0 = performance.now();
  const children = [];
  const per = Math.ceil(o.clients / o.processes);
  for (let p = 0; p < o.processes; p++) {
    const first = p * per;
    const count = Math.max(0, Math.min(per, o.clients - first));
    const stalled = p === o.processes - 1 ? Math.min(o.stalled, count) : 0;
    const spec: ClientSpec = { target: server.addresses[0]!, first, count, stalled, window: o.window };
    const child = fork(fileURLToPath(import.meta.url), [], {
      env: { ...process.env, KPNG_BENCH_CLIENTS: JSON.stringify(spec) },
      execArgv: [],
    });
    child.on("message", (r: SyncReport) => {
      if (r.error !== undefined) {
        failures++;
        if (failures <= 5) console.error(`client ${r.client}: ${r.error}`);
        return;
      }
      latest.set(r.client, r);
      check();
    });
    children.push(child);
  }
  await allSynced(1);
  const initialWall = performance.now() - t0;
  const initialUsage = process.cpuUsage(cpu0);
  const initialCpu = cpuMs(initialUsage);
  // First touches of memory (docs/performance.md): on a virtual machine a part of the CPU above.
  const initialFaults = process.resourceUsage().minorPageFault - faults0;
  const initial = latest.get(0)!;
  await stopProfile("initial");
  global.gc?.();
  const afterSync = process.memoryUsage();

  // One endpoint of a traffic-policy-Cluster service moves: every node's state changes.
  const changeCpu: number[] = [];
  const changeWall: number[] = [];
  let changeBytes = 0;
  const clusterServices = [...Array(o.services).keys()].filter((i) => policyOf(i) === "cluster");
  await startProfile();
  for (let round = 0; round < o.changes; round++) {
    const i = clusterServices[(round * 7919) % clusterServices.length]!;
    const slice = benchSlice(i, o.clients, ENDPOINTS, round + 1);
    await new Promise((r) => setTimeout(r, 200));
    const cpu = process.cpuUsage();
    const t = performance.now();
    store.upsert(slice);
    await allSynced(round + 2);
    changeWall.push(performance.now() - t);
    changeCpu.push(cpuMs(process.cpuUsage(cpu)));
    changeBytes = latest.get(0)!.bytes;
  }
  await stopProfile("changes");
  const stalled = server.streams().filter((s) => s.frames > 0 || s.bytes > 0);
  global.gc?.();
  const end = process.memoryUsage();
  const peakRss = process.resourceUsage().maxRSS * 1024;

  const byCpu = [...changeCpu].sort((a, b) => a - b);
  const byWall = [...changeWall].sort((a, b) => a - b);
  console.log(
    `clients=${o.clients} (one node each, own connection, ${o.processes} client processes) services=${o.services} endpoints/service=${ENDPOINTS} changes=${o.changes}`,
  );
  console.table([
    {
      clients: o.clients,
      services: o.services,
      "full state MB/client": (initial.bytes / 1e6).toFixed(2),
      "full state ops/client": initial.ops,
      "initial CPU ms": initialCpu.toFixed(0),
      "of it system ms": (initialUsage.system / 1000).toFixed(0),
      "initial page faults": initialFaults,
      "initial wall ms": initialWall.toFixed(0),
      "change bytes/client": changeBytes,
      "change CPU ms p50": percentile(byCpu, 50).toFixed(1),
      "change CPU ms p99": percentile(byCpu, 99).toFixed(1),
      "change wall ms p50": percentile(byWall, 50).toFixed(1),
      "change wall ms p99": percentile(byWall, 99).toFixed(1),
      "RSS peak MB": mb(peakRss),
      "heap after sync MB": mb(afterSync.heapUsed),
      "heap at end MB": mb(end.heapUsed),
    },
  ]);
  if (o.stalled > 0) {
    const frames = Math.max(0, ...stalled.map((s) => s.frames));
    const bytes = Math.max(0, ...stalled.map((s) => s.bytes));
    console.log(
      `stalled streams: ${stalled.length} of ${o.stalled} hold unsent data; per stream at most ${frames} frames not yet handed to HTTP/2 and ${(bytes / 1024).toFixed(0)} KiB in HTTP/2`,
    );
  }
  for (const child of children) child.kill();
  server.forceStop();
  process.exit(0);
}

if (process.env.KPNG_BENCH_CLIENTS !== undefined) {
  runClients(JSON.parse(process.env.KPNG_BENCH_CLIENTS) as ClientSpec);
} else {
  runAsKpngRuns();
  await runServer({
    clients: Number(args.clients ?? (args.quick ? 100 : 1000)),
    services: Number(args.services ?? (args.quick ? 1000 : 10_000)),
    processes: Number(args.processes ?? (args.quick ? 2 : 4)),
    changes: Number(args.changes),
    stalled: Number(args.stalled),
    profile: args.profile,
    window: Number(args["client-window"] ?? WATCH_FLOW_CONTROL_WINDOW),
  });
}
