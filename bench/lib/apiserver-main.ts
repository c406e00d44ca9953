// The test API server holding the benchmark cluster, as a process of its own so that its CPU and
// memory are not kpng's. Spawned by bench/lib/apiserver-process.ts; talks on stdin/stdout lines:
//
//   out: `ready <port>` once every object is stored
//   in:  `change <i> <generation>`  → updates Service i's EndpointSlice (a watch MODIFIED), then
//   out: `changed <i> <ms>` where ms is the wall clock (performance.timeOrigin + now) of the write
//
//   node bench/lib/apiserver-main.ts <services> <endpointsPerService> <probed> <probeEndpoint,…>

import { createInterface } from "node:readline";
import { TestApiServer } from "../../test/apiserver/server.ts";
import { type ClusterShape, clusterObjects, rawSlice } from "./cluster.ts";

const [services, endpoints, probed, probeEndpoints] = process.argv.slice(2);
const shape: ClusterShape = {
  services: Number(services),
  endpointsPerService: Number(endpoints),
  probed: Number(probed ?? 0),
  probeEndpoints: (probeEndpoints ?? "").split(",").filter((s) => s !== ""),
};

// Bookmarks well inside kpng's 60 s watch inactivity timeout: a quiet watch is not a dead one.
const api = await TestApiServer.start({ bookmarkIntervalMs: 10_000 });
for (const object of clusterObjects(shape)) api.create(object);
// The creations are history a watch never needs: kpng lists first.
api.compact();
process.stdout.write(`ready ${api.port}\n`);

const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  const [verb, i, generation] = line.split(" ");
  if (verb !== "change") return;
  const slice = rawSlice(shape, Number(i), Number(generation));
  const at = performance.timeOrigin + performance.now();
  api.update(slice);
  process.stdout.write(`changed ${i} ${at}\n`);
});
lines.on("close", () => void api.close().then(() => process.exit(0)));
