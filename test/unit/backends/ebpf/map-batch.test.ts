// Batched map writes: entries packed into reused buffers, written each time they fill. Whatever
// the batch size, a frontend reaches the kernel only after every chunk of the list it names, and
// a Service's list goes into one batch whole.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { listFrontends } from "../../../../src/backends/ebpf/list.ts";
import { DeleteList, WriteBatch } from "../../../../src/backends/ebpf/map-batch.ts";
import { renderService } from "../../../../src/backends/ebpf/render.ts";
import { MapWriter } from "../../../../src/backends/ebpf/writer.ts";
import type { LocalService } from "../../../../src/model/local.ts";
import { BackgroundFakeBpfMaps, FakeBpfMaps } from "../../../support/fake-bpf-maps.ts";
import { ep, manyServices, port } from "../nft/fixtures.ts";

const ctx = { nodePortIPs: { IPv4: [], IPv6: [] } };
const rendered = (services: readonly LocalService[]) =>
  services.map((s): [string, ReturnType<typeof renderService>] => [
    `${s.namespace}/${s.name}`,
    renderService(s, ctx),
  ]);

/** Fake maps that check, after every frontend write, that each frontend names a complete list. */
class CheckedMaps extends FakeBpfMaps {
  violations: string[] = [];
  override update(map: "services" | "backends", keys: Buffer, values: Buffer, count: number): void {
    super.update(map, keys, values, count);
    if (map !== "services") return;
    for (const f of listFrontends(this))
      if (f.backends.includes("?")) this.violations.push(`${f.address}: ${f.backends.join(",")}`);
  }
}

/** Background fake maps that check, each time entries land, that each frontend names a complete list. */
class CheckedBackgroundMaps extends BackgroundFakeBpfMaps {
  violations: string[] = [];
  override settle(): void {
    super.settle();
    this.#check();
  }
  override update(map: "services" | "backends", keys: Buffer, values: Buffer, count: number): void {
    super.update(map, keys, values, count);
    this.#check();
  }
  #check(): void {
    // Read through a plain fake over the same entries: reading these maps would settle again.
    const view = new FakeBpfMaps();
    view.maps.services = this.maps.services;
    view.maps.backends = this.maps.backends;
    for (const f of listFrontends(view))
      if (f.backends.includes("?")) this.violations.push(`${f.address}: ${f.backends.join(",")}`);
  }
}

/** `n` Services whose lists have `endpoints` backends each (two chunks for 9 to 16). */
const servicesOf = (n: number, endpoints: number): LocalService[] =>
  manyServices(n).map((s, i) => ({
    ...s,
    ports: [
      port({
        internalEndpoints: Array.from({ length: endpoints }, (_, e) =>
          ep(`10.${e + 1}.${i >> 8}.${i & 255}`),
        ),
      }),
    ],
  }));

const contents = (maps: FakeBpfMaps) => ({
  services: [...maps.maps.services].sort(),
  backends: [...maps.maps.backends].sort(),
});

describe("eBPF batched map writes", () => {
  test("in the background: a batch that fills goes to the kernel while the next one is encoded, and the maps end as with writes in place", () => {
    const inPlace = new FakeBpfMaps();
    new MapWriter(inPlace, { batchEntries: 7 }).fullSync(rendered(servicesOf(40, 10)));
    const maps = new CheckedBackgroundMaps();
    const report = new MapWriter(maps, { batchEntries: 7 }).fullSync(rendered(servicesOf(40, 10)));
    assert.equal(report.backendsWritten, 80);
    assert.equal(report.frontendsWritten, 40);
    assert.deepEqual(maps.violations, []);
    // Batches that filled went to the background; the last of each map was written in place.
    const inBackground = (map: string) =>
      maps.calls.filter((c) => c.startsWith(`in background: ${map}`)).map((c) => Number(c.split(" ")[3]));
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    assert.ok(inBackground("backends").length >= 80 / 7 - 1);
    assert.ok(inBackground("services").length >= 40 / 7 - 1);
    assert.ok(sum(inBackground("backends")) < 80 && sum(inBackground("services")) < 40);
    // Entries encoded while a batch was in the background did not overwrite it.
    assert.deepEqual(contents(maps), contents(inPlace));
  });

  test("small batches: lists are written before the frontends that name them, in every batch", () => {
    const maps = new CheckedMaps();
    const writer = new MapWriter(maps, { batchEntries: 7 });
    const report = writer.fullSync(rendered(servicesOf(40, 10)));
    assert.equal(report.backendsWritten, 80);
    assert.equal(report.frontendsWritten, 40);
    assert.deepEqual(maps.violations, []);
    // Batches of at most 7 entries, each syscall as large as the buffers allow.
    assert.ok(maps.calls.every((c) => Number(c.split(" ")[2]) <= 7));
    assert.ok(maps.calls.filter((c) => c.startsWith("update backends")).length >= 80 / 7);
    assert.equal(listFrontends(maps).length, 40);
  });

  test("a Service's list goes into one batch whole: a list that does not fit starts the next one", () => {
    const maps = new FakeBpfMaps();
    // Lists of three chunks, in batches of five entries.
    new MapWriter(maps, { batchEntries: 5 }).fullSync(rendered(servicesOf(3, 20)));
    assert.deepEqual(
      maps.calls.filter((c) => c.startsWith("update backends")),
      ["update backends 3", "update backends 3", "update backends 3"],
    );
  });

  test("the buffers are reused: a second write after a big one writes only its own entries", () => {
    const maps = new FakeBpfMaps();
    const writer = new MapWriter(maps, { batchEntries: 8 });
    writer.fullSync(rendered(servicesOf(20, 10)));
    maps.calls.length = 0;
    const changed = servicesOf(20, 10)[5]!;
    const report = writer.update(
      rendered([{ ...changed, ports: [port({ internalEndpoints: [ep("10.9.9.9")] })] }]),
    );
    assert.equal(report.backendsWritten, 1);
    assert.deepEqual(maps.calls, ["update backends 1", "update services 1", "delete backends 2"]);
  });

  for (const [where, Maps] of [
    ["in place", CheckedMaps],
    ["in the background", CheckedBackgroundMaps],
  ] as const) {
    test(`a full map half-way through small batches, written ${where}: the write throws, and no frontend names an incomplete list`, () => {
      // Room for 24 lists of two chunks and half of the 25th.
      const maps = new Maps({ backends: 49 });
      assert.throws(
        () => new MapWriter(maps, { batchEntries: 4 }).fullSync(rendered(servicesOf(30, 10))),
        (e: Error & { full?: boolean }) => e.full === true,
      );
      assert.deepEqual(maps.violations, []);
      assert.ok(listFrontends(maps).length > 0);
      for (const f of listFrontends(maps)) assert.equal(f.backends.length, 10);
    });
  }

  test("a write batch flushes the batch it depends on first, and counts what it added", () => {
    const maps = new FakeBpfMaps();
    const slots = new WriteBatch(maps, "backends", undefined, 4);
    const fronts = new WriteBatch(maps, "services", slots, 4);
    slots.keys.fill(1, 0, 8);
    slots.values.fill(0, 0, 20);
    slots.next();
    fronts.keys.fill(2, 0, 20);
    fronts.values.fill(0, 0, 16);
    fronts.next();
    fronts.flush();
    assert.deepEqual(maps.calls, ["update backends 1", "update services 1"]);
    assert.equal(slots.added, 1);
    slots.reset();
    assert.equal(slots.added, 0);
  });

  test("a delete list grows past its first buffer and deletes every key in one call", () => {
    const maps = new FakeBpfMaps();
    const writer = new MapWriter(maps);
    writer.fullSync(rendered(manyServices(100)));
    const list = new DeleteList(8, 2);
    // Lists of 10 backends: two chunks each.
    for (let id = 1; id <= 101; id++) list.addList(id, 0, 10);
    assert.equal(list.count, 202);
    maps.calls.length = 0;
    list.deleteFrom(maps, "backends");
    assert.deepEqual(maps.calls, ["delete backends 202"]);
    assert.equal(maps.maps.backends.size, 0);
  });
});
