// Fault: under a writer that replaced the cluster file every ~120 ms, the file source read it
// 47 times in 30 s, then not once for 13.5 minutes, silently, until the writer stopped: every
// change event pushed the next read further away. Now it reads at least every 2 s whatever the
// writer does (a file that never settles is read as it is, with a log line; it must still parse
// and pass the hold rule for big drops to be used).

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { FileSource } from "../../src/sources/file/source.ts";
import { capturingLogger, RecordingClusterSink, sleep } from "./support.ts";

/**
 * On tmpfs, as a ConfigMap volume is: on a disk, ext4 flushes a file truncated and written again
 * when it is closed, and a busy disk once held one read back past the bound (2.5 s in CI).
 */
const DIR = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
const WRITE_EVERY_MS = 100;
const FOR_MS = 30_000;
const MAX_GAP_MS = 2000;
/** A read caught mid-write that drops most objects is held 2 s before anything else is used. */
const APPLY_GAP_MS = 5000;

function longestGap(times: readonly number[], end: number): number {
  return Math.max(...[...times, end].map((t, i) => t - (i === 0 ? 0 : (times[i - 1] ?? 0))));
}

function gapReport(what: string, times: readonly number[], end: number): string {
  return `${times.length} ${what}; longest gap ${Math.round(longestGap(times, end))} ms`;
}

/** A cluster of `n` Services whose first one is named after the write, so every write differs. */
function cluster(write: number): string {
  const docs: string[] = [];
  for (let i = 0; i < 5; i++)
    docs.push(`apiVersion: v1
kind: Service
metadata: { name: s${i}-${i === 0 ? write : 0}, namespace: default }
spec: { clusterIP: 10.96.0.${i + 10}, ports: [{ name: http, port: 80 }] }
`);
  return docs.join("---\n");
}

describe("fault: a file that never stops changing", () => {
  for (const how of ["replaced (rename)", "rewritten in place"] as const)
    test(`${how} every ${WRITE_EVERY_MS} ms for ${FOR_MS / 1000} s: read at least every ${MAX_GAP_MS / 1000} s`, {
      timeout: FOR_MS + 30_000,
    }, async () => {
      const dir = await mkdtemp(join(DIR, "kpng-fault-file-busy-"));
      const file = join(dir, "cluster.yaml");
      const { log, lines } = capturingLogger();
      const sink = new RecordingClusterSink();
      await writeFile(file, cluster(0));
      const source = new FileSource({ path: file, watch: true, log });
      try {
        await source.start(sink);
        const started = performance.now();
        const epochStart = Date.now();
        let write = 0;
        while (performance.now() - started < FOR_MS) {
          write++;
          if (how === "rewritten in place") await writeFile(file, cluster(write));
          else {
            await writeFile(`${file}.tmp`, cluster(write));
            await rename(`${file}.tmp`, file);
          }
          await sleep(WRITE_EVERY_MS);
        }
        const ended = performance.now();
        // Every read, used or not: one caught mid-write may fail to parse or be held as a big drop.
        const readAt = lines.filter((l) => l.msg === "read the file").map((l) => Number(l.time) - epochStart);
        assert.ok(
          longestGap(readAt, ended - started) <= MAX_GAP_MS + 500,
          gapReport("reads", readAt, ended - started),
        );
        // And whole documents keep being used.
        const applied = sink.replaces
          .filter((r) => r.kind === "Service" && r.at >= started)
          .map((r) => r.at - started);
        assert.ok(
          longestGap(applied, ended - started) <= APPLY_GAP_MS,
          gapReport("applied", applied, ended - started),
        );
        if (how === "rewritten in place")
          assert.ok(
            lines.some((l) => /still changing/.test(String(l.msg))),
            "no log line for a still-changing file",
          );
      } finally {
        await source.stop();
        await rm(dir, { recursive: true, force: true });
      }
    });
});
