// Fan-out cost of the watch API: 10k services × 10 endpoints, N node clients on one server,
// one endpoint change. Prints bytes and time per change set, server memory and CPU time.
//   node bench/api-fanout.ts [clients=100] [services=10000]

import * as grpc from "@grpc/grpc-js";
import { OpItem, WatchReq } from "../src/api/gen/api/localv1/api.ts";
import { ApiServer } from "../src/api/server.ts";
import { silentLogger } from "../src/observability/log.ts";
import { endpoint, FakeBrain, service, servicePort } from "../test/unit/api/fixtures.ts";

const clients = Number(process.argv[2] ?? 100);
const serviceCount = Number(process.argv[3] ?? 10_000);

const eps = (i: number, shift = 0) =>
  Array.from({ length: 10 }, (_, j) => endpoint(`10.${(i >> 8) & 255}.${i & 255}.${j + shift}`, 8080));
const services = Array.from({ length: serviceCount }, (_, i) =>
  service(`svc-${i}`, { ports: [servicePort({ internalEndpoints: eps(i) })] }),
);

const brain = new FakeBrain();
// Every client watches its own node; each node's state shares the same service objects.
for (let n = 0; n < clients; n++) brain.update(`node-${n}`, services);
const server = new ApiServer({ listen: ["tcp://127.0.0.1:0"], localFeed: brain.feed, log: silentLogger });
await server.start();
const target = server.addresses[0]!;

interface Watcher {
  bytes: number;
  syncs: number;
  onSync?: () => void;
}
const watchers: Watcher[] = [];
const grpcClients: grpc.Client[] = [];
for (let n = 0; n < clients; n++) {
  const client = new grpc.Client(target, grpc.credentials.createInsecure());
  grpcClients.push(client);
  const w: Watcher = { bytes: 0, syncs: 0 };
  watchers.push(w);
  const call = client.makeBidiStreamRequest<WatchReq, Buffer>(
    "/localv1.Sets/Watch",
    (r) => Buffer.from(WatchReq.encode(r).finish()),
    (b) => b,
  );
  const req = { NodeName: `node-${n}`, InstanceID: "", Revision: 0 };
  call.on("data", (b: Buffer) => {
    w.bytes += b.length;
    if (OpItem.decode(b).Op?.$case === "Sync") {
      w.syncs++;
      call.write(req);
      w.onSync?.();
    }
  });
  call.on("error", () => {});
  call.write(req);
}
const allSynced = (count: number) =>
  new Promise<void>((resolve) => {
    const check = () => {
      if (watchers.every((w) => w.syncs >= count)) resolve();
    };
    for (const w of watchers) w.onSync = check;
    check();
  });

let t = performance.now();
await allSynced(1);
const initialMs = performance.now() - t;
const initialBytes = watchers[0]!.bytes;
global.gc?.();
const mem = process.memoryUsage();

const rows: string[][] = [];
for (let round = 0; round < 5; round++) {
  for (const w of watchers) w.bytes = 0;
  const changed = service(`svc-${round}`, {
    ports: [servicePort({ internalEndpoints: eps(round, 100 + round) })],
  });
  const cpu = process.cpuUsage();
  t = performance.now();
  for (let n = 0; n < clients; n++) brain.update(`node-${n}`, [changed]);
  await allSynced(round + 2);
  const ms = performance.now() - t;
  const used = process.cpuUsage(cpu);
  rows.push([
    `change ${round + 1}`,
    `${watchers[0]!.bytes} B/client`,
    `${ms.toFixed(1)} ms to all`,
    `${((used.user + used.system) / 1000).toFixed(1)} ms CPU`,
  ]);
}
console.log(`services=${serviceCount} endpoints/service=10 clients=${clients}`);
console.log(
  `initial full state: ${(initialBytes / 1e6).toFixed(2)} MB/client, ${initialMs.toFixed(0)} ms to all clients`,
);
console.log(
  `after sync: rss ${(mem.rss / 1e6).toFixed(0)} MB, heapUsed ${(mem.heapUsed / 1e6).toFixed(0)} MB (server and clients in one process)`,
);
console.table(rows);
for (const c of grpcClients) c.close();
server.forceStop();
process.exit(0);
