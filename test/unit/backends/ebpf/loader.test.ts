// The loader's bpftool commands, run by a fake bpftool that records them: a first load is three
// processes (the maps in one batch, `prog loadall` on its own, and once the caller has written
// the new maps, the attaches in one batch), and
// paths that bpftool's batch reader would split or unquote go one command per process. Started by
// the small process, bpftool is its child, not kpng's, and reads each batch from a file.

import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, afterEach, test } from "node:test";
import { HOOKS } from "../../../../src/backends/ebpf/layout.ts";
import {
  ATTACH_AFTER_WRITE,
  BpftoolLoader,
  NO_UDP_DESTROY,
  UDP_DESTROY_RETRY,
} from "../../../../src/backends/ebpf/programs.ts";
import { udpDestroyPins } from "../../../../src/backends/ebpf/udp-destroy.ts";
import { SmallSpawner } from "../../../../src/host/small-spawner.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/**
 * A bpftool that appends each call (and a batch's input, from its file or stdin) to `calls` beside
 * it, and its parent process and batch file to `started`, and succeeds, but for calls whose first
 * two words are `fail` (exit 1).
 */
function fakeBpftool(
  dir: string,
  fail = "",
  pinnedKeyBytes = 8,
): { path: string; calls: () => string[]; started: () => string[] } {
  const path = join(dir, "bpftool");
  const log = join(dir, "calls");
  const started = join(dir, "started");
  // What the loader reads back when it pins the UDP socket iterator (its link, program and map),
  // and the key size of a map pinned before.
  const answers = [
    `"-j map show pinned "*) echo '{"bytes_key":${pinnedKeyBytes}}' ;;`,
    `"-j link show pinned "*) echo '{"prog_id":7}' ;;`,
    `"-j prog show id 7") echo '{"map_ids":[9]}' ;;`,
    `"-j map show id 9") echo '{"name":"kpng_udp_gone"}' ;;`,
  ].join("\n");
  writeFileSync(
    path,
    `#!/bin/sh\nprintf 'CALL %s\\n' "$*" >> '${log}'\necho "parent $PPID file $3" >> '${started}'\nif [ "$1 $2" = '${fail}' ]; then echo refused >&2; exit 1; fi\nif [ "$1" = batch ]; then cat "$3" >> '${log}'; fi\ncase "$*" in\n${answers}\nesac\n`,
  );
  chmodSync(path, 0o755);
  const lines = (file: string) => () => readFileSync(file, "utf8").trim().split("\n");
  return { path, calls: lines(log), started: lines(started) };
}

function loader(root: string, bpftool: string, spawner?: SmallSpawner): BpftoolLoader {
  return new BpftoolLoader(
    {
      bpfRoot: join(root, "bpf"),
      cgroupRoot: join(root, "cgroup"),
      object: join(root, "kpng.bpf.o"),
      serviceEntries: 16,
      backendEntries: 32,
      affinityEntries: 8,
      reverseEntries: 16,
      bpftool,
    },
    spawner === undefined ? {} : { spawner },
  );
}

const ALL_ATTACHED = HOOKS.map((h) => `attached ${h}`);

test("a first load: the maps and the node's entry in one batch, loadall alone; the attaches in one batch when asked", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-loader-"));
  dirs.push(dir);
  const fake = fakeBpftool(dir);
  const l = loader(dir, fake.path);
  const done = await l.ensure();
  // 5 maps, the programs, and no attach yet: the new maps are empty.
  assert.equal(done.length, 7);
  assert.deepEqual(done.slice(-2), ["loaded programs", ATTACH_AFTER_WRITE]);
  const processes = () =>
    fake
      .calls()
      .filter((l) => l.startsWith("CALL "))
      .map((l) => l.split(" ").slice(1, 3).join(" "));
  assert.deepEqual(processes(), ["batch file", "prog loadall"]);
  assert.deepEqual(await l.attach(), ALL_ATTACHED);
  assert.deepEqual(await l.attach(), [], "once");
  const calls = fake.calls();
  assert.deepEqual(processes(), ["batch file", "prog loadall", "batch file"]);
  const lines = calls.filter((l) => !l.startsWith("CALL "));
  assert.deepEqual(
    lines.map((l) => l.split(" ").slice(0, 2).join(" ")),
    [...Array(5).fill("map create"), "map update", ...Array(HOOKS.length).fill("cgroup attach")],
  );
  assert.ok(lines.every((l) => !l.includes("prog loadall")));
});

test("started by the small process: bpftool is its child, and each batch comes in a file that is removed afterwards", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-loader-"));
  dirs.push(dir);
  const spawner = new SmallSpawner();
  after(() => spawner.close());
  const fake = fakeBpftool(dir);
  const l = loader(dir, fake.path, spawner);
  assert.equal((await l.ensure()).length, 7);
  // Until the attach, what the hooks run is the programs of before: no repair, no look.
  assert.ok(!(await l.check()).some((p) => p.endsWith("not attached")));
  assert.deepEqual(await l.attach(), ALL_ATTACHED);
  // The probe's look at what the cgroup holds (nothing is attached by a fake).
  assert.ok((await l.check()).includes("connect4 not attached"));
  const lines = fake.calls().filter((c) => !c.startsWith("CALL "));
  assert.deepEqual(
    lines.map((c) => c.split(" ").slice(0, 2).join(" ")),
    [...Array(5).fill("map create"), "map update", ...Array(HOOKS.length).fill("cgroup attach")],
  );
  const started = fake.started().map((line) => /^parent (\d+) file (.*)$/.exec(line));
  // The two batches, loadall, and the probe's look at the cgroup.
  assert.equal(started.length, 4);
  for (const m of started)
    assert.equal(m?.[1], String(spawner.pid), "forked by the small process, not by kpng");
  const files = fake
    .calls()
    .filter((c) => c.startsWith("CALL batch file "))
    .map((c) => c.slice("CALL batch file ".length));
  assert.equal(files.length, 2);
  for (const file of files) {
    assert.match(file, /kpng-bpftool-.*batch$/);
    assert.equal(existsSync(dirname(file)), false, "the batch's directory is removed");
  }
});

test("a path with a space: every command in a process of its own", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng loader "));
  dirs.push(dir);
  const fake = fakeBpftool(dir);
  const l = loader(dir, fake.path);
  await l.ensure();
  await l.attach();
  const calls = fake.calls();
  assert.equal(calls.filter((l) => l.startsWith("CALL batch")).length, 0);
  // 5 maps, the node's entry, loadall, one attach per hook.
  assert.equal(calls.length, 7 + HOOKS.length);
});

test("the UDP socket iterator refused by the kernel is not tried again", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-loader-"));
  dirs.push(dir);
  const fake = fakeBpftool(dir, "iter pin");
  const l = loader(dir, fake.path);
  const [first] = await l.ensureUdpDestroy();
  assert.ok(first?.startsWith(NO_UDP_DESTROY), first);
  assert.deepEqual(await l.ensureUdpDestroy(), []);
  assert.equal(fake.calls().filter((c) => c.startsWith("CALL iter pin")).length, 1);
  assert.ok(!(await l.check()).includes("UDP socket iterator not pinned"));
});

test("a load of the iterator that fails after the kernel took it is reported missing, and tried again", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-loader-"));
  dirs.push(dir);
  // `iter pin` succeeds; reading its link back fails (the pins removed meanwhile, say).
  const fake = fakeBpftool(dir, "-j link");
  const l = loader(dir, fake.path);
  const [first] = await l.ensureUdpDestroy();
  assert.ok(first?.startsWith(UDP_DESTROY_RETRY), first);
  assert.ok((await l.check()).includes("UDP socket iterator not pinned"));
  await l.ensureUdpDestroy();
  assert.equal(fake.calls().filter((c) => c.startsWith("CALL iter pin")).length, 2);
  // Each try costs a repair: after five in a row kpng gives up, as on a kernel that refuses it.
  const last: string[] = [];
  for (let i = 0; i < 3; i++) last.splice(0, last.length, ...(await l.ensureUdpDestroy()));
  assert.deepEqual(await l.ensureUdpDestroy(), []);
  assert.equal(fake.calls().filter((c) => c.startsWith("CALL iter pin")).length, 5);
  assert.ok(last[0]?.startsWith(`${NO_UDP_DESTROY}: 5 tries failed`), last[0]);
  assert.ok(!(await l.check()).includes("UDP socket iterator not pinned"));
});

/** Pins left by the process before: the iterator's link and its map (plain files stand in). */
function pinnedBefore(root: string): void {
  const pins = udpDestroyPins(join(root, "bpf"));
  mkdirSync(pins.dir, { recursive: true });
  writeFileSync(pins.iterator, "");
  writeFileSync(pins.map, "");
}

test("a UDP socket iterator pinned before, keyed as this version writes, is adopted (checked once)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-loader-"));
  dirs.push(dir);
  pinnedBefore(dir);
  const fake = fakeBpftool(dir);
  const l = loader(dir, fake.path);
  assert.deepEqual(await l.ensureUdpDestroy(), []);
  assert.deepEqual(await l.ensureUdpDestroy(), []);
  const calls = fake.calls();
  assert.equal(calls.filter((c) => c.startsWith("CALL -j map show pinned")).length, 1);
  assert.equal(calls.filter((c) => c.startsWith("CALL iter pin")).length, 0);
});

test("a UDP socket iterator of another kpng version (its map keyed otherwise) is replaced", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-loader-"));
  dirs.push(dir);
  pinnedBefore(dir);
  const fake = fakeBpftool(dir, "", 20);
  const done = await loader(dir, fake.path).ensureUdpDestroy();
  assert.deepEqual(done, [
    "replaced the UDP socket iterator of another kpng version",
    "pinned the UDP socket iterator",
  ]);
  assert.equal(fake.calls().filter((c) => c.startsWith("CALL iter pin")).length, 1);
});
