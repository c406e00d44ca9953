import assert from "node:assert/strict";
import { mkdtemp, rename, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, test } from "node:test";
import { pino } from "pino";
import type { ClusterSink } from "../../../../src/model/global.ts";
import type { KubeKind, KubeObject } from "../../../../src/model/kube.ts";
import { parseClusterFile } from "../../../../src/sources/file/parse.ts";
import { FileSource } from "../../../../src/sources/file/source.ts";
import { capturingLogger } from "../../../support/capturing-logger.ts";
import { eventually as eventuallyAsync } from "../../../support/eventually.ts";
import { settle } from "../../../support/settle.ts";

/** Polls until the condition holds (log lines arrive asynchronously after a reload). */
const eventually = (condition: () => boolean, what: string) =>
  eventuallyAsync(async () => condition(), what, 30_000, 20);

/** Records what the source delivers: the latest replace per kind, and the calls in order. */
class RecordingSink implements ClusterSink {
  readonly calls: string[] = [];
  readonly latest = new Map<KubeKind, string[]>();
  #waiters: (() => void)[] = [];
  upsert(object: KubeObject): void {
    this.calls.push(`upsert ${object.kind}`);
  }
  delete(kind: KubeKind, key: string): void {
    this.calls.push(`delete ${kind} ${key}`);
  }
  replace(kind: KubeKind, objects: readonly KubeObject[]): void {
    this.calls.push(`replace ${kind}`);
    this.latest.set(
      kind,
      objects.map((o) => o.metadata.name),
    );
    for (const wake of this.#waiters.splice(0)) wake();
  }
  synced(): void {
    this.calls.push("synced");
  }
  /** Resolves at the next replace; rejects if none comes within the time. */
  nextReplace(timeoutMs = 5000): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no replace within the time")), timeoutMs);
      this.#waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

const nodes = (...names: string[]) =>
  names.map((n) => `apiVersion: v1\nkind: Node\nmetadata: { name: ${n} }\n`).join("---\n");

describe("FileSource", () => {
  let dir: string;
  let file: string;
  let source: FileSource | undefined;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "kpng-file-source-"));
    file = join(dir, "cluster.yaml");
  });
  afterEach(async () => {
    await source?.stop();
    source = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  const start = async (watch: boolean) => {
    const { log, lines } = capturingLogger();
    const sink = new RecordingSink();
    source = new FileSource({ path: file, watch, log, debounceMs: 20, pollIntervalMs: 100 });
    await source.start(sink);
    return { sink, lines };
  };

  test("start replaces every kind with the file's objects, then reports synced", async () => {
    await writeFile(file, nodes("n1", "n2"));
    const { sink } = await start(false);
    assert.deepEqual(sink.calls, [
      "replace Service",
      "replace EndpointSlice",
      "replace Node",
      "replace ServiceCIDR",
      "synced",
    ]);
    assert.deepEqual(sink.latest.get("Node"), ["n1", "n2"]);
    assert.deepEqual(sink.latest.get("Service"), []);
  });

  test("the file's bytes are freed once parsed, not left for V8's next full collection", async () => {
    // 32 MiB of JSON that parses to two Nodes: what stays of it is the bytes themselves.
    const size = 32 * 2 ** 20;
    const list =
      '{"apiVersion":"v1","kind":"List","items":[' +
      '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}},' +
      '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2"}}]}';
    await writeFile(join(dir, "cluster.json"), list + " ".repeat(size - list.length));
    file = join(dir, "cluster.json");
    const before = process.memoryUsage().arrayBuffers;
    const { sink } = await start(false);
    const held = process.memoryUsage().arrayBuffers - before;
    assert.deepEqual(sink.latest.get("Node"), ["n1", "n2"]);
    assert.ok(
      held < size / 4,
      `${(held / 2 ** 20).toFixed(1)} MiB of array buffers still held after the start`,
    );
  });

  /** A JSON List of `count` Nodes, kubectl's layout, about 150 bytes per Node. */
  const nodeList = (count: number, broken = -1) =>
    JSON.stringify(
      {
        apiVersion: "v1",
        items: Array.from({ length: count }, (_, i) => ({
          apiVersion: "v1",
          kind: "Node",
          metadata: { name: `n${i}`, labels: { "topology.kubernetes.io/zone": "zone-0" } },
        })),
        kind: "List",
      },
      null,
      4,
    ).replace(`"n${broken}"`, `"n${broken}",`);

  test("a JSON List over the window size is read a window at a time, to the same objects", async () => {
    file = join(dir, "cluster.json");
    await writeFile(file, nodeList(40_000));
    const { sink, lines } = await start(false);
    assert.equal(sink.latest.get("Node")?.length, 40_000);
    assert.equal(sink.latest.get("Node")?.[39_999], "n39999");
    const read = lines.find((l) => l.msg === "read the file");
    assert.equal(read?.windowed, true, JSON.stringify(read));
  });

  test("a stop while a large file is read at start: nothing is applied, and no watch is left running", async () => {
    file = join(dir, "cluster.json");
    await writeFile(file, nodeList(40_000));
    const { log } = capturingLogger();
    const sink = new RecordingSink();
    source = new FileSource({ path: file, watch: true, log, debounceMs: 20, pollIntervalMs: 50 });
    const started = source.start(sink);
    // The read gives the event loop turns: the stop comes while it is under way.
    await settle(3);
    await source.stop();
    await started;
    assert.deepEqual(sink.calls, []);
    // A directory watch and a stat poll each keep a resource open.
    const watches = process
      .getActiveResourcesInfo()
      .filter((r) => r === "FSEventWrap" || r === "StatWatcher");
    assert.deepEqual(watches, [], "a watch was started after the stop");
  });

  test("a large JSON List that breaks is reported as the whole read reports it; the last good state stays", async () => {
    file = join(dir, "cluster.json");
    await writeFile(file, nodeList(40_000));
    const { sink, lines } = await start(true);
    const broken = nodeList(40_000, 20_000);
    await writeFile(file, broken);
    await eventually(() => lines.some((l) => l.level === 50), "an error line");
    const error = lines.find((l) => l.level === 50);
    const whole = parseClusterFile(broken, file);
    assert.ok(!whole.ok);
    assert.equal(error?.error, whole.error);
    assert.equal(sink.latest.get("Node")?.length, 40_000);
  });

  test("invalid objects are logged by name and reason and skipped, the rest is served", async () => {
    await writeFile(file, `${nodes("good")}---\nkind: Node\nmetadata: { labels: { a: b } }\n`);
    const { sink, lines } = await start(false);
    assert.deepEqual(sink.latest.get("Node"), ["good"]);
    const warning = lines.find((l) => l.msg === "skipping invalid object");
    assert.ok(warning, "one log line for the invalid object");
    assert.equal(warning.kind, "Node");
    assert.match(String(warning.reason), /cluster\.yaml:\d+/);
  });

  test("unknown kinds are ignored with a debug line only", async () => {
    await writeFile(file, `${nodes("n")}---\napiVersion: v1\nkind: Pod\nmetadata: { name: p }\n`);
    const { sink, lines } = await start(false);
    assert.deepEqual(sink.latest.get("Node"), ["n"]);
    const levels = lines.filter((l) => JSON.stringify(l).includes("Pod")).map((l) => l.level);
    assert.deepEqual(levels, [20]);
  });

  test("a broken file at start is an error naming the file and the position", async () => {
    await writeFile(file, "kind: Node\nmetadata: { name: [oops\n");
    const sink = new RecordingSink();
    source = new FileSource({ path: file, watch: false, log: pino({ level: "silent" }) });
    await assert.rejects(source.start(sink), (err: Error) => {
      assert.match(err.message, /cluster\.yaml:\d+:\d+: YAML syntax error/);
      return true;
    });
    assert.deepEqual(sink.calls, [], "nothing delivered, not even synced");
  });

  test("a missing file at start is an error naming the file", async () => {
    source = new FileSource({ path: file, watch: false, log: pino({ level: "silent" }) });
    await assert.rejects(source.start(new RecordingSink()), /cannot read .*cluster\.yaml: ENOENT/);
  });

  test("with watch, a changed file replaces the state", async () => {
    await writeFile(file, nodes("n1"));
    const { sink } = await start(true);
    const replaced = sink.nextReplace();
    await writeFile(file, nodes("n1", "n2"));
    await replaced;
    await eventually(() => sink.latest.get("Node")?.length === 2, "the new node");
    assert.deepEqual(sink.latest.get("Node"), ["n1", "n2"]);
    assert.equal(sink.calls.filter((c) => c === "synced").length, 1, "synced is reported once");
  });

  test("with watch, an editor's save by rename is seen", async () => {
    await writeFile(file, nodes("n1"));
    const { sink } = await start(true);
    const replaced = sink.nextReplace();
    await writeFile(join(dir, ".cluster.yaml.swp"), nodes("renamed"));
    await rename(join(dir, ".cluster.yaml.swp"), file);
    await replaced;
    await eventually(() => sink.latest.get("Node")?.[0] === "renamed", "the renamed file's node");
  });

  test("a file that breaks keeps the last good state and says so; fixing it applies the fix", async () => {
    await writeFile(file, nodes("n1"));
    const { sink, lines } = await start(true);
    await writeFile(file, "kind: Node\nmetadata: { name: [oops\n");
    await eventually(() => lines.some((l) => l.level === 50), "an error line");
    const error = lines.find((l) => l.level === 50)!;
    assert.match(String(error.msg), /keeping the last good state/);
    assert.match(String(error.error), /cluster\.yaml:\d+:\d+: YAML syntax error: Flow sequence/);
    assert.deepEqual(sink.latest.get("Node"), ["n1"], "the last good state stays");
    const callsWhileBroken = sink.calls.length;

    const replaced = sink.nextReplace();
    await writeFile(file, nodes("n1", "fixed"));
    await replaced;
    await eventually(() => sink.latest.get("Node")?.length === 2, "the fixed file's nodes");
    assert.ok(sink.calls.length > callsWhileBroken);
    assert.ok(lines.some((l) => l.msg === "the file is readable again"));
  });

  test("a file that disappears keeps the last good state; when it is back it is applied", async () => {
    await writeFile(file, nodes("n1"));
    const { sink, lines } = await start(true);
    await unlink(file);
    await eventually(
      () => lines.some((l) => l.level === 50 && /ENOENT/.test(String(l.error))),
      "a missing-file error",
    );
    assert.deepEqual(sink.latest.get("Node"), ["n1"]);
    const replaced = sink.nextReplace();
    await writeFile(file, nodes("back"));
    await replaced;
    await eventually(() => sink.latest.get("Node")?.[0] === "back", "the restored file");
  });

  test("without watch, later changes are not read", async () => {
    await writeFile(file, nodes("n1"));
    const { sink } = await start(false);
    // A watching source on the same file tells when the change has become visible.
    const watcher = new FileSource({ path: file, watch: true, log: capturingLogger().log, debounceMs: 20 });
    const watched = new RecordingSink();
    await watcher.start(watched);
    try {
      await writeFile(file, nodes("n1", "n2"));
      await eventually(
        () => watched.latest.get("Node")?.length === 2,
        "the watching source to read the change",
      );
      await settle();
      assert.deepEqual(sink.latest.get("Node"), ["n1"]);
    } finally {
      await watcher.stop();
    }
  });

  test("rewriting the same content replaces nothing", async () => {
    await writeFile(file, nodes("n1"));
    const { sink, lines } = await start(true);
    const before = sink.calls.length;
    const reads = () => lines.filter((l) => l.msg === "read the file").length;
    const readsBefore = reads();
    await writeFile(file, nodes("n1"));
    await eventually(() => reads() > readsBefore, "the source to read the rewritten file");
    await settle();
    assert.equal(sink.calls.length, before);
  });
});
