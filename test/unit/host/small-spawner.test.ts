import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { SmallSpawner } from "../../../src/host/small-spawner.ts";
import { registry } from "../../../src/observability/metrics.ts";
import { eventually } from "../../support/eventually.ts";

/** A series of this process's registry (0 when absent). */
async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  const found = values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x));
  return found?.value ?? 0;
}

/** Whether `pid` runs (a zombie, killed and waiting for its reaper, does not). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

describe("commands started from the small process", () => {
  const spawner = new SmallSpawner();
  after(() => spawner.close());

  test("a command is forked by the small process, not by kpng, and its result comes back", async () => {
    const r = await spawner.exec(["sh", "-c", 'echo "$PPID"; echo oops >&2; exit 3'], { timeoutMs: 10_000 });
    assert.equal(r.stdout.trim(), String(spawner.pid));
    assert.notEqual(spawner.pid, process.pid);
    assert.deepEqual([r.code, r.stderr, r.timedOut], [3, "oops\n", false]);
  });

  test("output too large for a message goes into a new file of kpng's, written by the command itself", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kpng-test-"));
    try {
      const file = join(dir, "output");
      // 8 MiB of lines, then the parent's pid.
      const r = await spawner.exec(["sh", "-c", 'yes line | head -c 8388608; echo "parent $PPID"'], {
        timeoutMs: 10_000,
        stdoutFile: file,
      });
      assert.deepEqual([r.code, r.stdout], [0, ""]);
      const output = readFileSync(file, "utf8");
      assert.equal(output.length, 8_388_608 + `parent ${spawner.pid}\n`.length);
      assert.ok(output.endsWith(`parent ${spawner.pid}\n`));
      assert.equal(statSync(file).mode & 0o777, 0o600);
      // A file that is there already is not written to.
      await assert.rejects(
        spawner.exec(["echo", "x"], { timeoutMs: 10_000, stdoutFile: file }),
        /cannot create/,
      );
      assert.equal(readFileSync(file, "utf8"), output);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("niceness and the deadline hold as with execCommand", async () => {
    // Its stdin closes once its priority is set.
    const niced = await spawner.exec(["sh", "-c", "read x; nice"], { timeoutMs: 10_000, niceness: 7 });
    assert.equal(niced.stdout.trim(), "7");
    const hung = await spawner.exec(["sleep", "30"], { timeoutMs: 200 });
    assert.equal(hung.timedOut, true);
  });

  test("a command that cannot start is a rejection", async () => {
    await assert.rejects(spawner.exec(["/nonexistent/conntrack"], { timeoutMs: 10_000 }), /ENOENT/);
  });

  test("start failures and deadlines are counted in kpng's metrics, not the small process's", async () => {
    const failures = () =>
      metric("kpng_exec_spawn_failures_total", { command: "kpng-absent", code: "ENOENT" });
    const timeouts = () => metric("kpng_exec_timeouts_total", { command: "sleep" });
    const [failedBefore, timedOutBefore] = [await failures(), await timeouts()];
    await assert.rejects(spawner.exec(["/nonexistent/kpng-absent"], { timeoutMs: 10_000 }), /ENOENT/);
    assert.equal((await spawner.exec(["sleep", "30"], { timeoutMs: 100 })).timedOut, true);
    assert.equal(await failures(), failedBefore + 1);
    assert.equal(await timeouts(), timedOutBefore + 1);
  });

  test("if the small process dies, the call in flight fails and the next one starts it again", async () => {
    const first = spawner.pid;
    const inFlight = spawner.exec(["sleep", "30"], { timeoutMs: 20_000 });
    process.kill(first ?? 0, "SIGKILL");
    await assert.rejects(inFlight, /exited/);
    const r = await spawner.exec(["sh", "-c", 'echo "$PPID"'], { timeoutMs: 10_000 });
    assert.notEqual(spawner.pid, first);
    assert.equal(r.stdout.trim(), String(spawner.pid));
  });

  test("the commands of a small process that died are killed, not left running", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kpng-small-spawner-"));
    const pidFile = join(dir, "pid");
    try {
      const inFlight = spawner.exec(["sh", "-c", 'echo $$ > "$1"; exec sleep 30', "sh", pidFile], {
        timeoutMs: 20_000,
      });
      await eventually(
        async () => existsSync(pidFile) && readFileSync(pidFile, "utf8").endsWith("\n"),
        "the pid",
      );
      const pid = Number(readFileSync(pidFile, "utf8"));
      assert.equal(running(pid), true);
      process.kill(spawner.pid ?? 0, "SIGKILL");
      await assert.rejects(inFlight, /exited/);
      await eventually(async () => !running(pid), "the orphaned command to be killed", 5000, 50);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
