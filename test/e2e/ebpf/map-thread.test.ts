// Map writes in the background, in the kernel: kpng's own maps made with bpftool on a bpffs of the
// test's own, written by the map writer through PinnedMaps in small batches, so that most of them
// go to the update thread. The maps then hold every Service whole; a map that fills half-way
// fails the write as full, and no frontend names a list the kernel did not take whole.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { MAPS } from "../../../src/backends/ebpf/layout.ts";
import { listFrontends } from "../../../src/backends/ebpf/list.ts";
import { type MapWriteError, mapPinPath, PinnedMaps } from "../../../src/backends/ebpf/maps.ts";
import { renderService } from "../../../src/backends/ebpf/render.ts";
import { UpdateThread } from "../../../src/backends/ebpf/update-thread.ts";
import { MapWriter } from "../../../src/backends/ebpf/writer.ts";
import { type BpfMounts, ebpfSkipReason, mountBpf } from "../../support/netns.ts";
import { ep, manyServices, port } from "../../unit/backends/nft/fixtures.ts";

const skip = await ebpfSkipReason();
const ctx = { nodePortIPs: { IPv4: [], IPv6: [] } };
/** n Services of 10 endpoints each: two chunks of the backend map each. */
const rendered = (n: number) =>
  manyServices(n).map((s, i): [string, ReturnType<typeof renderService>] => [
    `${s.namespace}/${s.name}`,
    renderService(
      {
        ...s,
        ports: [
          port({
            internalEndpoints: Array.from({ length: 10 }, (_, e) => ep(`10.${e + 1}.${i >> 8}.${i & 255}`)),
          }),
        ],
      },
      ctx,
    ),
  ]);

/** An update thread that counts the batches given to it. */
class CountingThread extends UpdateThread {
  submitted = 0;
  override submit(...args: Parameters<UpdateThread["submit"]>): ReturnType<UpdateThread["submit"]> {
    this.submitted++;
    return super.submit(...args);
  }
}

describe("eBPF map writes on the update thread", { skip }, () => {
  let mounts: BpfMounts;

  before(async () => {
    mounts = await mountBpf();
  });

  after(async () => {
    await mounts?.destroy();
  });

  /** kpng's two balancing maps, made afresh under `<bpfRoot>/<dir>/kpng/maps/`. */
  function makeMaps(dir: string, backendEntries: number): string {
    const root = join(mounts.bpfRoot, dir);
    mkdirSync(join(root, "kpng", "maps"), { recursive: true });
    for (const [name, entries] of [
      ["services", 4096],
      ["backends", backendEntries],
    ] as const) {
      const m = MAPS[name];
      execFileSync("bpftool", [
        "map",
        "create",
        mapPinPath(root, name),
        "type",
        m.type,
        "key",
        String(m.key),
        "value",
        String(m.value),
        "entries",
        String(entries),
        "name",
        m.name,
        "flags",
        "1",
      ]);
    }
    return root;
  }

  test("a cold start in batches of 64: the batches go to the thread, and the kernel holds every Service whole", () => {
    const thread = new CountingThread();
    const maps = new PinnedMaps(makeMaps("whole", 4096), thread);
    try {
      const report = new MapWriter(maps, { batchEntries: 64 }).fullSync(rendered(1000));
      assert.equal(report.backendsWritten, 2000);
      assert.equal(report.frontendsWritten, 1000);
      assert.ok(thread.submitted >= 2000 / 64 - 2, `${thread.submitted} batches on the thread`);
      const listed = listFrontends(maps);
      assert.equal(listed.length, 1000);
      for (const f of listed)
        assert.ok(f.backends.length === 10 && !f.backends.includes("?"), `${f.address}: ${f.backends}`);
    } finally {
      maps.close();
    }
  });

  test("a map that fills half-way: the write fails as full, and every frontend written names a whole list", () => {
    const maps = new PinnedMaps(makeMaps("full", 1024));
    try {
      assert.throws(
        () => new MapWriter(maps, { batchEntries: 64 }).fullSync(rendered(1000)),
        (e: MapWriteError) => e.full && e.map === "backends",
      );
      const listed = listFrontends(maps);
      assert.ok(listed.length > 0 && listed.length < 1000, `${listed.length} frontends`);
      for (const f of listed)
        assert.ok(f.backends.length === 10 && !f.backends.includes("?"), `${f.address}: ${f.backends}`);
    } finally {
      maps.close();
    }
  });
});
