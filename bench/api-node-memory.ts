// Memory per served node on the watch API: a real brain (ClusterStore + one local-state feed per
// node) behind the server, N clients each watching a distinct node name (the clients run in a
// child process, so the memory printed is the server's alone). Also shows the --max-nodes cap
// holding the count down when more names arrive than it allows.
//   node --expose-gc bench/api-node-memory.ts [nodes=200] [services=2000] [maxNodes=100] [--quick]
// --quick: 40 nodes, 1k services, at most 20.

import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { WatchReq } from "../src/api/gen/api/localv1/api.ts";
import { ApiServer } from "../src/api/server.ts";
import { localStateFeed } from "../src/brain/local-state-feed.ts";
import { ClusterStore } from "../src/brain/store.ts";
import { silentLogger } from "../src/observability/log.ts";
import { ep, slice, svc } from "../test/unit/brain/fixtures.ts";
import { positionalArgs, quick, table } from "./lib/table.ts";

const args = positionalArgs();

const SYNC_TAG = 0x0a;

function mb(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}

function measure(): { heap: number; rss: number } {
  globalThis.gc?.();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
}

function runClients(target: string, first: number, count: number): void {
  for (let n = first; n < first + count; n++) {
    // A distinct option gives each client its own connection, as separate backends have.
    const client = new grpc.Client(target, grpc.credentials.createInsecure(), {
      "grpc.max_receive_message_length": -1,
      "kpng.bench_client": n,
    });
    const call = client.makeBidiStreamRequest<WatchReq, Buffer>(
      "/localv1.Sets/Watch",
      (r) => Buffer.from(WatchReq.encode(r).finish()),
      (b) => b,
    );
    call.on("data", (b: Buffer) => {
      if (b[0] === SYNC_TAG) process.send?.({ node: n });
    });
    call.on("error", () => process.send?.({ node: n, refused: true }));
    call.write({ NodeName: `node-${n}`, InstanceID: "", Revision: 0 });
  }
}

if (process.env.KPNG_BENCH_CLIENTS !== undefined) {
  const [target = "", first = "0", count = "0"] = process.env.KPNG_BENCH_CLIENTS.split(" ");
  runClients(target, Number(first), Number(count));
} else {
  await runServer(
    Number(args[0] ?? (quick ? 40 : 200)),
    Number(args[1] ?? (quick ? 1000 : 2000)),
    Number(args[2] ?? (quick ? 20 : 100)),
  );
}

async function runServer(nodes: number, services: number, maxNodes: number): Promise<void> {
  const store = new ClusterStore();
  for (let i = 0; i < services; i++) {
    const name = `svc-${i}`;
    const ip = `10.96.${(i >> 8) & 255}.${i & 255}`;
    store.upsert(svc({ name, clusterIP: ip, clusterIPs: [ip] }));
    const eps = Array.from({ length: 10 }, (_, j) => ep(`10.${(i >> 8) & 255}.${i & 255}.${j + 1}`));
    store.upsert(slice(eps, { service: name }));
  }
  store.synced();
  const run = async (cap: number, clients: number) => {
    const server = new ApiServer({
      listen: ["tcp://127.0.0.1:0"],
      localFeed: (name) => localStateFeed(store, name),
      log: silentLogger,
      hub: { maxNodes: cap },
    });
    await server.start();
    const before = measure();
    const synced = new Set<number>();
    let refused = 0;
    const child = fork(fileURLToPath(import.meta.url), [], {
      env: { ...process.env, KPNG_BENCH_CLIENTS: `${server.addresses[0]} 0 ${clients}` },
    });
    await new Promise<void>((resolve) => {
      child.on("message", (m: { node: number; refused?: boolean }) => {
        if (m.refused) refused++;
        else synced.add(m.node);
        if (synced.size + refused >= clients) resolve();
      });
    });
    const after = measure();
    const served = server.nodeCount;
    child.kill();
    server.forceStop();
    return { before, after, served, refused, synced: synced.size };
  };

  const free = await run(nodes, nodes);
  const perNode = (free.after.heap - free.before.heap) / free.served;
  const capped = await run(maxNodes, nodes);
  console.log(`${services} services x 10 endpoints, ${nodes} distinct node names`);
  console.log(
    table(
      ["--max-nodes", "served", "refused", "heap MB", "rss MB", "heap MB per served node"],
      [
        [
          String(nodes),
          String(free.served),
          "0",
          `${mb(free.before.heap)} -> ${mb(free.after.heap)}`,
          `${mb(free.before.rss)} -> ${mb(free.after.rss)}`,
          mb(perNode),
        ],
        [
          String(maxNodes),
          String(capped.served),
          String(capped.refused),
          `${mb(capped.before.heap)} -> ${mb(capped.after.heap)}`,
          `${mb(capped.before.rss)} -> ${mb(capped.after.rss)}`,
          "",
        ],
      ],
    ),
  );
  process.exit(0);
}
