// Maps pinned by another kpng version, in the kernel: a frontend map and a backend map of another
// value layout under the bpffs of the test's own. The loader unpins those two, creates them anew
// and loads the programs against them; a map of the right layout and size stays as it was. Then
// a kpng started with other --bpf-map-* sizes: the maps of another size are created anew. Programs
// loaded against new maps wait for attach(): until the maps are written, the programs attached
// before serve on with the maps they hold.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { HOOKS, MAPS, programName } from "../../../src/backends/ebpf/layout.ts";
import { mapPinPath, pinnedMapLayout } from "../../../src/backends/ebpf/maps.ts";
import { ATTACH_AFTER_WRITE, BpftoolLoader } from "../../../src/backends/ebpf/programs.ts";
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

  /** bpftool's JSON answer; `cgroup show` prints nothing at all for a cgroup without programs. */
  const bpftoolJson = <T>(...args: string[]): T =>
    JSON.parse(execFileSync("bpftool", ["-j", ...args], { encoding: "utf8" }).trim() || "[]") as T;
  /** The program each hook of the clients' cgroup runs, by id, in HOOKS' order. */
  const attachedIds = () => {
    const byType = new Map(
      bpftoolJson<{ id: number; name: string }[]>("cgroup", "show", mounts.clients).map((a) => [
        a.name,
        a.id,
      ]),
    );
    return HOOKS.map((h) => byType.get(programName(h)));
  };
  /** The pinned programs, by id, in HOOKS' order. */
  const pinnedIds = () =>
    HOOKS.map(
      (h) =>
        bpftoolJson<{ id: number }>(
          "prog",
          "show",
          "pinned",
          join(mounts.bpfRoot, "kpng", "progs", programName(h)),
        ).id,
    );
  const allAttached = HOOKS.map((h) => `attached ${h}`);

  const idOf = (m: keyof typeof MAPS) =>
    bpftoolJson<{ id: number }>("map", "show", "pinned", mapPinPath(mounts.bpfRoot, m)).id;

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
    // New maps are empty: the programs wait until they are written.
    assert.ok(done.includes(ATTACH_AFTER_WRITE), `${done}`);
    assert.deepEqual(
      attachedIds(),
      HOOKS.map(() => undefined),
    );
    assert.deepEqual(await loader.check(), []);
    assert.deepEqual(await loader.attach(), allAttached);
    assert.deepEqual(attachedIds(), pinnedIds());
    // Everything is in place now: a second ensure changes nothing.
    assert.deepEqual(await loader.ensure(), []);
  });

  test("a kpng started with other --bpf-map-* sizes creates those maps anew (the kernel keeps a map's size); the others stay", async () => {
    const before = { services: idOf("services"), reverse: idOf("reverse"), node: idOf("node") };
    const serving = attachedIds();
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
    // The programs of the run before serve on with their maps until the new ones are written.
    assert.deepEqual(attachedIds(), serving);
    assert.notDeepEqual(pinnedIds(), serving);
    assert.deepEqual(await raised.check(), [], "nothing for a repair to do meanwhile");
    assert.deepEqual(await raised.attach(), allAttached);
    assert.deepEqual(attachedIds(), pinnedIds());
    // A restart with the same sizes keeps every map (its entries serve on while kpng starts).
    assert.deepEqual(await loaderOf({ services: 2048, affinity: 4096 }).ensure(), []);
  });

  test("a start that ended before its attach: the next one attaches the pinned programs (same names, other ids) once it has written the maps", async () => {
    const serving = attachedIds();
    const done = await loaderOf({ services: 4096, affinity: 4096 }).ensure();
    assert.ok(done.includes(ATTACH_AFTER_WRITE), `${done}`);
    assert.deepEqual(attachedIds(), serving);
    // That kpng stops here. The next one finds every map and program pinned, the maps maybe
    // unwritten: the programs of before serve on until it has written them.
    const next = loaderOf({ services: 4096, affinity: 4096 });
    assert.deepEqual(await next.ensure(), [ATTACH_AFTER_WRITE]);
    assert.deepEqual(attachedIds(), serving);
    assert.deepEqual(await next.attach(), allAttached);
    assert.deepEqual(attachedIds(), pinnedIds());
    assert.deepEqual(await next.ensure(), []);
  });
});
