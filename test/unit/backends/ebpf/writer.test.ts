// The map writer against fake maps: what it writes for a change, in which order (a Service
// switches to its new backend list in one step), and how a restart adopts what the maps hold.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { decodeServiceValue, encodeFrontend } from "../../../../src/backends/ebpf/layout.ts";
import { listFrontends } from "../../../../src/backends/ebpf/list.ts";
import { type RenderedGroup, renderService } from "../../../../src/backends/ebpf/render.ts";
import { MapWriter } from "../../../../src/backends/ebpf/writer.ts";
import type { LocalService } from "../../../../src/model/local.ts";
import { FakeBpfMaps } from "../../../support/fake-bpf-maps.ts";
import { ep, manyServices, port, service } from "../nft/fixtures.ts";

const ctx = { nodePortIPs: { IPv4: ["192.0.2.1"], IPv6: [] } };
const rendered = (services: readonly LocalService[]): [string, readonly RenderedGroup[]][] =>
  services.map((s) => [`${s.namespace}/${s.name}`, renderService(s, ctx)]);
const listing = (maps: FakeBpfMaps) =>
  listFrontends(maps).map(
    (f) => `${f.address}:${f.port}/${f.protocol} ${f.reject ? "reject" : f.backends.join(",")}`,
  );

describe("eBPF map writer", () => {
  test("a full sync writes every frontend with its backend list", () => {
    const maps = new FakeBpfMaps();
    new MapWriter(maps).fullSync(
      rendered([
        service(),
        service({
          name: "empty",
          clusterIPs: ["203.0.113.17"],
          ports: [port({ internalEndpoints: [] })],
        }),
      ]),
    );
    assert.deepEqual(listing(maps), [
      "203.0.113.10:80/TCP 198.51.100.2:8080,198.51.100.3:8080",
      "203.0.113.17:80/TCP reject",
    ]);
  });

  test("one endpoint change writes that Service only: its new list, then one value, then the old list goes", () => {
    const maps = new FakeBpfMaps();
    const writer = new MapWriter(maps);
    writer.fullSync(rendered(manyServices(100)));
    maps.calls.length = 0;
    const changed = manyServices(100)[7]!;
    const moved = { ...changed, ports: [port({ internalEndpoints: [ep("10.9.9.9")] })] };
    const report = writer.update(rendered([moved]));
    assert.deepEqual(report, {
      services: 1,
      frontendsWritten: 1,
      frontendsDeleted: 0,
      backendsWritten: 1,
      backendsDeleted: 1,
    });
    // The order is what makes the switch atomic for a connect.
    assert.deepEqual(maps.calls, ["update backends 1", "update services 1", "delete backends 1"]);
    const value = decodeServiceValue(
      maps.maps.services.get(
        encodeFrontend({ ip: moved.families[0]!.clusterIP, port: 80, protocol: "TCP" }).toString("hex"),
      )!,
    );
    assert.equal(value.count, 1);
    assert.equal(value.gen, 1);
  });

  test("a list of more backends than a chunk holds takes several, in order; a restart adopts it whole and rewrites it when a chunk is missing", () => {
    const endpoints = (n: number) => Array.from({ length: n }, (_, i) => ep(`198.51.100.${i + 1}`));
    const big = (n: number) => service({ ports: [port({ internalEndpoints: endpoints(n) })] });
    const maps = new FakeBpfMaps();
    const writer = new MapWriter(maps);
    const cold = writer.fullSync(rendered([big(20)]));
    // Three chunks: 8 + 8 + 4 backends.
    assert.equal(cold.backendsWritten, 3);
    const expected = endpoints(20)
      .map((e) => `${e.ip}:8080`)
      .join(",");
    assert.deepEqual(listing(maps), [`203.0.113.10:80/TCP ${expected}`]);
    maps.calls.length = 0;
    const shrunk = writer.update(rendered([big(9)]));
    assert.equal(shrunk.backendsWritten, 2);
    assert.equal(shrunk.backendsDeleted, 3);
    assert.equal(maps.maps.backends.size, 2);
    // A restart adopts both lists as they are.
    maps.calls.length = 0;
    new MapWriter(maps).fullSync(rendered([big(9)]));
    assert.deepEqual(maps.calls, []);
    // A list that lost its first chunk is not the list its value names: it is written anew.
    const [firstChunk] = [...maps.entries("backends")][0]!;
    maps.delete("backends", firstChunk, 1);
    maps.calls.length = 0;
    const repaired = new MapWriter(maps).fullSync(rendered([big(9)]));
    assert.equal(repaired.backendsWritten, 2);
    assert.deepEqual(listing(maps), [`203.0.113.10:80/TCP ${expected.split(",").slice(0, 9).join(",")}`]);
    assert.equal(maps.maps.backends.size, 2);
  });

  test("an unchanged Service is not written again", () => {
    const maps = new FakeBpfMaps();
    const writer = new MapWriter(maps);
    writer.fullSync(rendered([service()]));
    maps.calls.length = 0;
    writer.update(rendered([service()]));
    assert.deepEqual(maps.calls, []);
  });

  test("a deleted Service loses its frontends and its lists", () => {
    const maps = new FakeBpfMaps();
    const writer = new MapWriter(maps);
    writer.fullSync(rendered([service()]));
    writer.update([["default/web", undefined]]);
    assert.equal(maps.maps.services.size, 0);
    assert.equal(maps.maps.backends.size, 0);
  });

  test("a new external IP is written with its own list, the cluster IP's left alone", () => {
    const maps = new FakeBpfMaps();
    const writer = new MapWriter(maps);
    writer.fullSync(rendered([service()]));
    maps.calls.length = 0;
    writer.update(rendered([service({ externalIPs: ["192.0.2.50"] })]));
    assert.deepEqual(maps.calls, ["update backends 1", "update services 1"]);
  });

  test("a restarted writer adopts the maps: nothing is rewritten, stale entries go", () => {
    const maps = new FakeBpfMaps();
    new MapWriter(maps).fullSync(
      rendered([service(), service({ name: "gone", clusterIPs: ["203.0.113.99"] })]),
    );
    maps.calls.length = 0;
    const report = new MapWriter(maps).fullSync(rendered([service()]));
    assert.deepEqual(maps.calls, ["delete services 1", "delete backends 1"]);
    assert.equal(report.frontendsWritten, 0);
    assert.deepEqual(listing(maps), ["203.0.113.10:80/TCP 198.51.100.2:8080,198.51.100.3:8080"]);
  });

  test("a restart with changed endpoints switches each Service in place (same id, next gen)", () => {
    const maps = new FakeBpfMaps();
    new MapWriter(maps).fullSync(rendered([service()]));
    const key = encodeFrontend({ ip: "203.0.113.10", port: 80, protocol: "TCP" }).toString("hex");
    const before = decodeServiceValue(maps.maps.services.get(key)!);
    new MapWriter(maps).fullSync(
      rendered([service({ ports: [port({ internalEndpoints: [ep("198.51.100.4")] })] })]),
    );
    const after = decodeServiceValue(maps.maps.services.get(key)!);
    assert.equal(after.id, before.id);
    assert.equal(after.gen, before.gen + 1);
    assert.deepEqual(listing(maps), ["203.0.113.10:80/TCP 198.51.100.4:8080"]);
    assert.equal(maps.maps.backends.size, 1);
  });

  test("maps written by one writer of both families: a writer per family adopts its own and reuses none of the other's ids", () => {
    const maps = new FakeBpfMaps();
    const v6 = service({
      name: "v6",
      clusterIPs: ["2001:db8::10"],
      ports: [port({ endpointFamilies: ["IPv6"], internalEndpoints: [ep("2001:db8:1::2")] })],
    });
    // Ids 1 (IPv4) and 2 (IPv6), as a writer of every family gives them.
    new MapWriter(maps).fullSync(rendered([service(), v6]));
    const before = listing(maps);
    const v4Writer = new MapWriter(maps, { family: 4 });
    const v6Writer = new MapWriter(maps, { family: 6 });
    maps.calls.length = 0;
    v6Writer.fullSync(
      rendered([service(), v6]).map(([k, g]) => [k, g.filter((x) => x.name.includes("IPv6"))]),
    );
    v4Writer.fullSync(
      rendered([service(), v6]).map(([k, g]) => [k, g.filter((x) => x.name.includes("IPv4"))]),
    );
    assert.deepEqual(maps.calls, []);
    assert.deepEqual(listing(maps), before);
    // A new IPv4 list gets an id above the IPv6 one it saw, not 2.
    v4Writer.update(rendered([service({ name: "new", clusterIPs: ["203.0.113.20"] })]));
    const ids = [...maps.maps.services.values()].map((v) => decodeServiceValue(v).id).sort();
    assert.deepEqual(ids, [1, 2, 3]);
  });

  test("a single-stack cluster's other family renders and writes nothing; a Service that leaves a family loses its entries there", () => {
    const inFamily = (services: readonly LocalService[]): [string, readonly RenderedGroup[]][] =>
      services.map((s) => [`${s.namespace}/${s.name}`, renderService(s, ctx, "IPv6")]);
    assert.deepEqual(renderService(service(), ctx, "IPv6"), []);
    const maps = new FakeBpfMaps();
    const v6Writer = new MapWriter(maps, { family: 6 });
    const cold = v6Writer.fullSync(inFamily(manyServices(50)));
    assert.deepEqual(cold, {
      services: 50,
      frontendsWritten: 0,
      frontendsDeleted: 0,
      backendsWritten: 0,
      backendsDeleted: 0,
    });
    assert.equal(v6Writer.size, 0);
    const dual = (clusterIPs: string[]) =>
      service({
        name: "dual",
        clusterIPs,
        ports: [
          port({
            endpointFamilies: ["IPv4", "IPv6"],
            internalEndpoints: [ep("198.51.100.2"), ep("2001:db8:1::2")],
          }),
        ],
      });
    v6Writer.update(inFamily([dual(["203.0.113.30", "2001:db8::30"])]));
    assert.equal(maps.maps.services.size, 1);
    assert.equal(maps.maps.backends.size, 1);
    const gone = v6Writer.update(inFamily([dual(["203.0.113.30"])]));
    assert.equal(gone.frontendsDeleted, 1);
    assert.equal(gone.backendsDeleted, 1);
    assert.equal(maps.maps.services.size, 0);
    assert.equal(maps.maps.backends.size, 0);
    assert.equal(v6Writer.size, 0);
  });

  test("a full map fails the write; no frontend names an incomplete list, and a full sync recovers once there is room", () => {
    const maps = new FakeBpfMaps({ backends: 50 });
    const writer = new MapWriter(maps);
    assert.throws(
      () => writer.fullSync(rendered(manyServices(100))),
      (e: Error & { full?: boolean }) => e.full === true,
    );
    for (const f of listFrontends(maps))
      assert.ok(f.backends.length === 2 && !f.backends.includes("?"), JSON.stringify(f));
    maps.capacity.backends = 1000;
    new MapWriter(maps).fullSync(rendered(manyServices(100)));
    assert.equal(listFrontends(maps).length, 100);
    assert.equal(maps.maps.backends.size, 100);
  });

  test("a listing during a sync shows each frontend with a whole list, old or new", () => {
    // A sync runs between the listing's scan of the backends and its scan of the frontends.
    class SyncedBetweenScans extends FakeBpfMaps {
      between: (() => void) | undefined;
      override *entries(map: "services" | "backends"): Iterable<[Buffer, Buffer]> {
        yield* super.entries(map);
        if (map === "backends") {
          this.between?.();
          this.between = undefined;
        }
      }
    }
    const maps = new SyncedBetweenScans();
    const writer = new MapWriter(maps);
    writer.fullSync(rendered(manyServices(3)));
    const changed = manyServices(3)[1]!;
    maps.between = () =>
      writer.update(
        rendered([
          { ...changed, ports: [port({ internalEndpoints: [ep("10.9.9.8"), ep("10.9.9.9")] })] },
          service({ name: "added", clusterIPs: ["203.0.113.99"] }),
        ]),
      );
    const listed = listFrontends(maps);
    assert.equal(listed.length, 4);
    for (const f of listed)
      assert.ok(f.backends.length === 2 && !f.backends.includes("?"), JSON.stringify(f));
    assert.ok(
      listed.some((f) => f.backends.join() === "10.9.9.8:8080,10.9.9.9:8080"),
      "the moved Service's new list",
    );
  });

  test("a failing map write throws and leaves the old list serving", () => {
    const maps = new FakeBpfMaps();
    const writer = new MapWriter(maps);
    writer.fullSync(rendered([service()]));
    maps.failNextWrites = 1;
    assert.throws(() =>
      writer.update(rendered([service({ ports: [port({ internalEndpoints: [ep("198.51.100.4")] })] })])),
    );
    assert.deepEqual(listing(maps), ["203.0.113.10:80/TCP 198.51.100.2:8080,198.51.100.3:8080"]);
  });
});
