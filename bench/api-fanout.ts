// Fan-out cost of the watch API: 10k services × 10 endpoints, N node clients on one server,
// one endpoint change at a time. The clients run in a child process, so the memory and CPU time
// printed are the server's alone.
//   node --expose-gc bench/api-fanout.ts [clients=100] [services=10000] [changes=5] [--quick]
// --quick: 20 clients, 1k services, 2 changes.

import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { WatchReq } from "../src/api/gen/api/localv1/api.ts";
import { ApiServer } from "../src/api/server.ts";
import { silentLogger } from "../src/observability/log.ts";
import { endpoint, FakeBrain, service, servicePort } from "../test/unit/api/fixtures.ts";
import { positionalArgs, quick } from "./lib/table.ts";

const args = positionalArgs();

/** What the client process reports to the server process after each Sync. */
interface SyncReport {
  readonly client: number;
  readonly syncs: number;
  /** Bytes of the change set this Sync ended (gRPC message bodies). */
  readonly bytes: number;
}

// An OpItem whose first byte is field 1 (Sync), length-delimited: 0x0a.
const SYNC_TAG = 0x0a;

function runClients(target: string, clients: number): void {
  for (let n = 0; n < clients; n++) {
    const client = new grpc.Client(target, grpc.credentials.createInsecure(), {
      "grpc.max_receive_message_length": -1,
    });
    const call = client.makeBidiStreamRequest<WatchReq, Buffer>(
      "/localv1.Sets/Watch",
      (r) => Buffer.from(WatchReq.encode(r).finish()),
      (b) => b,
    );
    const req = { NodeName: `node-${n}`, InstanceID: "", Revision: 0 };
    let bytes = 0;
    let syncs = 0;
    call.on("data", (b: Buffer) => {
      bytes += b.length;
      if (b[0] !== SYNC_TAG) return;
      syncs++;
      process.send?.({ client: n, syncs, bytes } satisfies SyncReport);
      bytes = 0;
      call.write(req);
    });
    call.on("error", () => {});
    call.write(req);
  }
}

if (process.env.KPNG_BENCH_CLIENTS !== undefined) {
  const [target = "", count = "0"] = process.env.KPNG_BENCH_CLIENTS.split(" ");
  runClients(target, Number(count));
} else {
  await runServer(Number(args[0] ?? (quick ? 20 : 100)), Number(args[1] ?? (quick ? 1000 : 10_000)));
}

async function runServer(clients: number, serviceCount: number): Promise<void> {
  const eps = (i: number, shift = 0) =>
    Array.from({ length: 10 }, (_, j) => endpoint(`10.${(i >> 8) & 255}.${i & 255}.${j + shift}`, 8080));
  const services = Array.from({ length: serviceCount }, (_, i) =>
    service(`svc-${i}`, { ports: [servicePort({ internalEndpoints: eps(i) })] }),
  );
  const brain = new FakeBrain();
  // Every client watches its own node; the nodes' states share the same service objects, as the
  // brain's do for services that compute the same on every node.
  for (let n = 0; n < clients; n++) brain.update(`node-${n}`, services);
  const server = new ApiServer({ listen: ["tcp://127.0.0.1:0"], localFeed: brain.feed, log: silentLogger });
  await server.start();

  const latest = new Map<number, SyncReport>();
  let waiting: { syncs: number; resolve: () => void } | undefined;
  const check = () => {
    if (waiting === undefined || latest.size < clients) return;
    for (const r of latest.values()) if (r.syncs < waiting.syncs) return;
    waiting.resolve();
  };
  const allSynced = (syncs: number) =>
    new Promise<void>((resolve) => {
      waiting = { syncs, resolve };
      check();
    });
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, KPNG_BENCH_CLIENTS: `${server.addresses[0]} ${clients}` },
    execArgv: [],
  });
  child.on("message", (r: SyncReport) => {
    latest.set(r.client, r);
    check();
  });

  const cpu0 = process.cpuUsage();
  let t = performance.now();
  await allSynced(1);
  const initialMs = performance.now() - t;
  const initialCpu = process.cpuUsage(cpu0);
  const initialBytes = latest.get(0)?.bytes ?? 0;
  global.gc?.();
  const mem = process.memoryUsage();

  const rows: Record<string, string>[] = [];
  const rounds = Number(args[2] ?? (quick ? 2 : 5));
  for (let round = 0; round < rounds; round++) {
    const changed = service(`svc-${round}`, {
      ports: [servicePort({ internalEndpoints: eps(round, 100 + round) })],
    });
    // The brain's own work (a new state per node) is not the server's: build the states first.
    const states = Array.from({ length: clients }, (_, n) => {
      const previous = brain.state(`node-${n}`)!;
      const services = new Map(previous.services).set(`default/${changed.name}`, changed);
      return { node: previous.node, revision: previous.revision + 1, services, serviceCIDRs: [] };
    });
    const cpu = process.cpuUsage();
    t = performance.now();
    for (const state of states) brain.push(state);
    await allSynced(round + 2);
    const ms = performance.now() - t;
    const used = process.cpuUsage(cpu);
    rows.push({
      change: `endpoint change ${round + 1}`,
      "bytes/client": String(latest.get(0)?.bytes ?? 0),
      "to all clients": `${ms.toFixed(1)} ms`,
      "server CPU": `${((used.user + used.system) / 1000).toFixed(1)} ms`,
    });
  }
  console.log(
    `services=${serviceCount} endpoints/service=10 clients=${clients} (clients in a child process)`,
  );
  console.log(
    `initial full state: ${(initialBytes / 1e6).toFixed(2)} MB/client, ${initialMs.toFixed(0)} ms to all clients, server CPU ${((initialCpu.user + initialCpu.system) / 1000).toFixed(0)} ms`,
  );
  console.log(
    `server after sync: rss ${(mem.rss / 1e6).toFixed(0)} MB, heapUsed ${(mem.heapUsed / 1e6).toFixed(0)} MB`,
  );
  console.table(rows);
  child.kill();
  server.forceStop();
  process.exit(0);
}
