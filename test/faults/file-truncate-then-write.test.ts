// Fault: a writer that truncates the cluster file and writes it later (shell `>`, `kubectl get … >
// f`) made the file source publish an empty or partial state, and the backend rejected every
// Service until the write finished.

import assert from "node:assert/strict";
import { mkdir, mkdtemp, open, rename, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, test } from "node:test";
import { FileSource } from "../../src/sources/file/source.ts";
import { capturingLogger, eventually, RecordingClusterSink, sleep } from "./support.ts";

const service = (i: number) => `apiVersion: v1
kind: Service
metadata: { name: s${i}, namespace: default }
spec:
  clusterIP: 10.96.0.${i + 10}
  clusterIPs: [10.96.0.${i + 10}]
  ports: [{ name: http, port: 80, targetPort: 8080 }]
`;
const services = (from: number, to: number) => {
  const docs: string[] = [];
  for (let i = from; i < to; i++) docs.push(service(i));
  return docs.join("---\n");
};
const NINE = services(0, 9);

describe("fault: the cluster file caught half-written", () => {
  let dir: string;
  let file: string;
  let source: FileSource | undefined;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "kpng-fault-file-"));
    file = join(dir, "cluster.yaml");
  });
  afterEach(async () => {
    await source?.stop();
    source = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  const start = async (options: { settleMs?: number; shrinkHoldMs?: number } = {}) => {
    const { log, lines } = capturingLogger();
    const sink = new RecordingClusterSink();
    source = new FileSource({
      path: file,
      watch: true,
      log,
      debounceMs: 20,
      pollIntervalMs: 100,
      ...options,
    });
    await source.start(sink);
    return { sink, lines };
  };

  test("open('w') then the write 0.4 s later never publishes fewer Services", async () => {
    await writeFile(file, NINE);
    const { sink } = await start();
    const handle = await open(file, "w"); // truncates, as a shell redirection does
    await sleep(400);
    await handle.write(NINE.replace("port: 80,", "port: 81,"));
    await handle.close();
    await eventually(() => sink.serviceCounts().length >= 2, "the rewritten file is applied");
    await sleep(300);
    assert.deepEqual(sink.serviceCounts(), [9, 9]);
  });

  test("a write cut at a document boundary never publishes the first half", async () => {
    await writeFile(file, NINE);
    const { sink } = await start();
    const handle = await open(file, "w");
    await handle.write(`${services(0, 5)}---\n`);
    await sleep(400);
    await handle.write(services(5, 9).replace("port: 80,", "port: 81,"));
    await handle.close();
    await eventually(() => sink.serviceCounts().length >= 2, "the rewritten file is applied");
    await sleep(300);
    assert.deepEqual(sink.serviceCounts(), [9, 9]);
  });

  test("a file emptied for good is applied only after the hold time, with a warning", async () => {
    await writeFile(file, NINE);
    const { sink, lines } = await start({ settleMs: 100, shrinkHoldMs: 800 });
    const emptied = performance.now();
    await writeFile(file, "");
    await eventually(() => sink.serviceCounts().length === 2, "the empty file is applied");
    const applied = sink.replaces.at(-1)!.at;
    assert.deepEqual(sink.serviceCounts(), [9, 0]);
    assert.ok(applied - emptied >= 800, `applied after ${Math.round(applied - emptied)} ms, before the hold`);
    assert.ok(lines.some((l) => l.level === 40 && /lost most of its objects/.test(String(l.msg))));
  });

  test("a file that loses most objects and is refilled within the hold never publishes the loss", async () => {
    await writeFile(file, NINE);
    const { sink } = await start({ settleMs: 100, shrinkHoldMs: 800 });
    await writeFile(file, services(0, 2));
    await sleep(400);
    await writeFile(file, services(0, 8));
    await eventually(() => sink.serviceCounts().length === 2, "the refilled file is applied");
    await sleep(1000);
    assert.deepEqual(sink.serviceCounts(), [9, 8]);
  });

  test("an atomic replace is applied at once, without the settle time", async () => {
    await writeFile(file, NINE);
    const { sink } = await start({ settleMs: 3000 });
    await writeFile(join(dir, "next.yaml"), services(0, 8));
    const replaced = performance.now();
    await rename(join(dir, "next.yaml"), file);
    await eventually(() => sink.serviceCounts().length === 2, "the replaced file", 2500);
    assert.ok(sink.replaces.at(-1)!.at - replaced < 2500);
    assert.deepEqual(sink.serviceCounts(), [9, 8]);
  });

  test("a ConfigMap-style symlink swap is applied at once, without the settle time", async () => {
    // A mounted ConfigMap: cluster.yaml -> ..data/cluster.yaml, ..data -> ..<timestamp>/
    await mkdir(join(dir, "..v1"));
    await writeFile(join(dir, "..v1", "cluster.yaml"), NINE);
    await symlink("..v1", join(dir, "..data"));
    await symlink(join("..data", "cluster.yaml"), file);
    const { sink } = await start({ settleMs: 3000 });
    await mkdir(join(dir, "..v2"));
    await writeFile(join(dir, "..v2", "cluster.yaml"), services(0, 8));
    await symlink("..v2", join(dir, "..data_tmp"));
    await rename(join(dir, "..data_tmp"), join(dir, "..data"));
    await eventually(() => sink.serviceCounts().length === 2, "the swapped file", 2500);
    assert.deepEqual(sink.serviceCounts(), [9, 8]);
  });
});
