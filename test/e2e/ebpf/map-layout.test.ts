// Maps pinned by another kpng version, in the kernel: a frontend map and a backend map of another
// value layout under the bpffs of the test's own. The loader unpins those two, creates them anew
// and loads the programs against them; a map of the right layout and size stays as it was. Then
// a kpng started with other --bpf-map-* sizes: the maps of another size are created anew.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { MAPS } from "../../../src/backends/ebpf/layout.ts";
import { mapPinPath, pinnedMapLayout } from "../../../src/backends/ebpf/maps.ts";
import { BpftoolLoader } from "../../../src/backends/ebpf/programs.ts";
import { type BpfMounts, ebpfSkipReason, mountBpf } from "../../support/netns.ts";

const skip = await ebpfSkipReason();
const OBJECT = fileURLToPath(new URL("../../../build/kpng.bpf.o", import.meta.url));

describe("eBPF maps of another version's layout", { skip }, () => {
  let mounts: BpfMounts;
  let loader: BpftoolLoader;

  const loaderOf = (sizes: { services: number; affinity: number }) =>
    new BpftoolLoader({
      bpfRoot: mounts.bpfRoot,
      cgroupRoot: mounts.clients,
      object: OBJECT,
      serviceEntries: sizes.services,
      backendEntries: 1024,
      affinityEntries: sizes.affinity,
      reverseEntries: 1024,
    });

  before(async () => {
    mounts = await mountBpf();
    loader = loaderOf({ services: 1024, affinity: 1024 });
  });

  after(async () => {
    await loader?.remove();
    await mounts?.destroy();
  });

  const idOf = (m: keyof typeof MAPS) =>
    (
      JSON.parse(
        execFileSync("bpftool", ["-j", "map", "show", "pinned", mapPinPath(mounts.bpfRoot, m)], {
          encoding: "utf8",
        }),
      ) as { id: number }
    ).id;

  test("are unpinned and created anew, both balancing maps together; a map of the right layout and size stays", async () => {
    mkdirSync(join(mounts.bpfRoot, "kpng", "maps"), { recursive: true });
    // An older backend map: one endpoint (20 bytes) per entry.
    const pins = [
      ["backends", "hash", 8, 20, "1"],
      ["services", "hash", MAPS.services.key, MAPS.services.value, "1"],
      ["affinity", "lru_hash", MAPS.affinity.key, MAPS.affinity.value, "0"],
    ] as const;
    for (const [m, type, key, value, flags] of pins)
      execFileSync("bpftool", [
        "map",
        "create",
        mapPinPath(mounts.bpfRoot, m),
        "type",
        type,
        "key",
        String(key),
        "value",
        String(value),
        "entries",
        "1024",
        "name",
        MAPS[m].name,
        "flags",
        flags,
      ]);
    const affinityBefore = idOf("affinity");
    const servicesBefore = idOf("services");

    const done = await loader.ensure();
    assert.ok(
      done.some((d) => d.includes("another kpng version") && d.endsWith("kpng_be")),
      `kpng_be unpinned: ${done}`,
    );
    assert.ok(
      done.some((d) => d.includes("with the other balancing map") && d.endsWith("kpng_svc")),
      `kpng_svc unpinned with it: ${done}`,
    );
    for (const name of ["kpng_svc", "kpng_be"])
      assert.ok(done.includes(`created map ${name}`), `${name} created: ${done}`);
    assert.ok(!done.some((d) => d.endsWith("kpng_aff")), `kpng_aff left alone: ${done}`);
    assert.deepEqual(pinnedMapLayout(mapPinPath(mounts.bpfRoot, "backends")), {
      keySize: MAPS.backends.key,
      valueSize: MAPS.backends.value,
      maxEntries: 1024,
    });
    assert.notEqual(idOf("services"), servicesBefore);
    assert.equal(idOf("affinity"), affinityBefore);
    // Everything is in place now: a second ensure changes nothing.
    assert.deepEqual(await loader.ensure(), []);
  });

  test("a kpng started with other --bpf-map-* sizes creates those maps anew (the kernel keeps a map's size); the others stay", async () => {
    const before = { services: idOf("services"), reverse: idOf("reverse"), node: idOf("node") };
    const raised = loaderOf({ services: 2048, affinity: 4096 });
    const done = await raised.ensure();
    assert.ok(
      done.some(
        (d) => d.includes("another size") && d.includes("1024 entries, not 2048") && d.endsWith("kpng_svc"),
      ),
      `kpng_svc unpinned: ${done}`,
    );
    assert.ok(
      done.some((d) => d.includes("another size") && d.includes("not 4096") && d.endsWith("kpng_aff")),
      `kpng_aff unpinned: ${done}`,
    );
    assert.ok(
      done.some((d) => d.includes("with the other balancing map") && d.endsWith("kpng_be")),
      `${done}`,
    );
    assert.equal(pinnedMapLayout(mapPinPath(mounts.bpfRoot, "services"))?.maxEntries, 2048);
    assert.equal(pinnedMapLayout(mapPinPath(mounts.bpfRoot, "affinity"))?.maxEntries, 4096);
    assert.notEqual(idOf("services"), before.services);
    assert.equal(idOf("reverse"), before.reverse);
    assert.equal(idOf("node"), before.node);
    // A restart with the same sizes keeps every map (its entries serve on while kpng starts).
    assert.deepEqual(await loaderOf({ services: 2048, affinity: 4096 }).ensure(), []);
  });
});
