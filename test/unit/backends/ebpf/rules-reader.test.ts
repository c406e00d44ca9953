// explain --rules ebpf: the Service's map entries are read by key from maps the writer filled and
// compared with the renderer's; a removed, changed or unwanted entry is a drift.

import assert from "node:assert/strict";
import { test } from "node:test";
import { BACKEND_BYTES, encodeChunkKey, encodeFrontend, MAPS } from "../../../../src/backends/ebpf/layout.ts";
import { renderService } from "../../../../src/backends/ebpf/render.ts";
import { EbpfRulesReader } from "../../../../src/backends/ebpf/rules-reader.ts";
import { MapWriter } from "../../../../src/backends/ebpf/writer.ts";
import type { LocalService } from "../../../../src/model/local.ts";
import type { RulesReader } from "../../../../src/plugin/rules-reader.ts";
import { FakeBpfMaps } from "../../../support/fake-bpf-maps.ts";
import { ep, port, service } from "../nft/fixtures.ts";

const render = { nodePortIPs: { IPv4: ["192.0.2.1"], IPv6: [] } };
const web = service({ ports: [port({ nodePort: 30080 })] });

/** Maps as the backend programs `services`. */
function programmed(...services: LocalService[]): FakeBpfMaps {
  const maps = new FakeBpfMaps();
  new MapWriter(maps).fullSync(services.map((s) => [`${s.namespace}/${s.name}`, renderService(s, render)]));
  return maps;
}

const reader = (maps: FakeBpfMaps, companion?: RulesReader) =>
  new EbpfRulesReader({ openMaps: () => maps, render, bpfRoot: "/sys/fs/bpf", companion });
const read = (maps: FakeBpfMaps, svc: LocalService) => reader(maps).read(svc, new AbortController().signal);

test("maps the backend wrote: every frontend of the Service is reported, without drift", async () => {
  const report = await read(programmed(web), web);
  assert.equal(report.backend, "ebpf");
  assert.deepEqual(report.drift, []);
  assert.deepEqual(
    report.objects.map((o) => `${o.name} ${o.lines.join(" | ")}`),
    [
      "/sys/fs/bpf/kpng/maps/kpng_svc 203.0.113.10:80/TCP 198.51.100.2:8080 198.51.100.3:8080",
      "/sys/fs/bpf/kpng/maps/kpng_svc 192.0.2.1:30080/TCP 198.51.100.2:8080 198.51.100.3:8080",
    ],
  );
});

test("a frontend removed from kpng_svc is a drift naming what the backend would write", async () => {
  const maps = programmed(web);
  maps.delete("services", encodeFrontend({ ip: "192.0.2.1", port: 30080, protocol: "TCP" }), 1);
  const report = await read(maps, web);
  assert.deepEqual(report.drift, [
    { object: "bpf 192.0.2.1:30080/TCP", expected: "198.51.100.2:8080 198.51.100.3:8080", found: "" },
  ]);
});

test("a chunk removed from kpng_be is a drift: the frontend names missing backends", async () => {
  const maps = programmed(web);
  const [chunk] = [...maps.entries("backends")][0]!;
  maps.delete("backends", chunk, 1);
  const report = await read(maps, web);
  // The cluster IP and the NodePort have lists of their own: the first list written lost its chunk.
  assert.deepEqual(report.drift, [
    {
      object: "bpf 203.0.113.10:80/TCP",
      expected: "198.51.100.2:8080 198.51.100.3:8080",
      found: "? ?",
    },
  ]);
});

test("a backend zeroed in its chunk is a drift: the frontend names it missing", async () => {
  const maps = programmed(web);
  const [key, value] = [...maps.entries("backends")][0]!;
  const changed = Buffer.from(value);
  changed.fill(0, BACKEND_BYTES, 2 * BACKEND_BYTES);
  maps.update("backends", key, changed, 1);
  const report = await read(maps, web);
  assert.deepEqual(report.drift, [
    {
      object: "bpf 203.0.113.10:80/TCP",
      expected: "198.51.100.2:8080 198.51.100.3:8080",
      found: "198.51.100.2:8080 ?",
    },
  ]);
});

test("the brain moved on (an endpoint gone, affinity on): the stale maps drift", async () => {
  const maps = programmed(web);
  const moved = service({
    sessionAffinitySeconds: 10800,
    ports: [
      port({
        nodePort: 30080,
        internalEndpoints: [ep("198.51.100.2")],
        externalEndpoints: [ep("198.51.100.2")],
      }),
    ],
  });
  const report = await read(maps, moved);
  assert.deepEqual(
    report.drift.map((d) => d.expected),
    ["198.51.100.2:8080 affinity=10800s", "198.51.100.2:8080 affinity=10800s"],
  );
});

for (const [where, chunk, index] of [
  ["in the list's last chunk", 0, 2],
  ["in a chunk past the list's", 1, 0],
] as const) {
  test(`a backend past the list's count, ${where}, is reported as stray`, async () => {
    const maps = programmed(web);
    const [, value] = [...maps.entries("services")][0]!;
    const id = value.readUInt32LE(0);
    const gen = value.readUInt16LE(6);
    const key = encodeChunkKey({ id, gen, chunk });
    const be = Buffer.from(maps.get("backends", encodeChunkKey({ id, gen, chunk: 0 }))!);
    const into = chunk === 0 ? be : Buffer.alloc(MAPS.backends.value);
    be.copy(into, index * BACKEND_BYTES, 0, BACKEND_BYTES);
    maps.update("backends", key, into, 1);
    const report = await read(maps, web);
    assert.deepEqual(report.drift, [
      {
        object: "bpf 203.0.113.10:80/TCP",
        expected: "198.51.100.2:8080 198.51.100.3:8080",
        found: "198.51.100.2:8080 198.51.100.3:8080 stray backend: 198.51.100.2:8080",
      },
    ]);
  });
}

test("a frontend the maps must not hold (internal Local policy, no local endpoint: nft drops) is a drift", async () => {
  const maps = programmed(web);
  const local = service({
    internalTrafficPolicy: "Local",
    ports: [
      port({
        nodePort: 30080,
        internalEndpoints: [],
        externalEndpoints: [ep("198.51.100.2"), ep("198.51.100.3")],
        endpointFamilies: ["IPv4"],
      }),
    ],
  });
  // The NodePort still balances; the cluster IP is nft's to drop, so the maps' entry is stale.
  const rendered = renderService(local, render).flatMap((g) => g.frontends.map((f) => `${f.ip}:${f.port}`));
  assert.deepEqual(rendered, ["192.0.2.1:30080"]);
  const report = await read(maps, local);
  assert.deepEqual(
    report.drift.map((d) => [d.object, d.expected]),
    [["bpf 203.0.113.10:80/TCP", ""]],
  );
});

test("the companion's nft objects and drift are reported after the maps'", async () => {
  const companion: RulesReader = {
    read: async () => ({
      backend: "nft",
      objects: [{ kind: "nft chain", name: "ip kpng svc-x", lines: ["(missing)"] }],
      drift: [{ object: "ip kpng chain svc-x", expected: "present", found: "" }],
    }),
  };
  const report = await reader(programmed(web), companion).read(web, new AbortController().signal);
  assert.equal(report.backend, "ebpf");
  assert.deepEqual(
    report.objects.map((o) => o.kind),
    ["bpf map entry", "bpf map entry", "nft chain"],
  );
  assert.deepEqual(report.drift, [{ object: "ip kpng chain svc-x", expected: "present", found: "" }]);
});
