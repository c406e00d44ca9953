import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { SmallSpawner } from "../../../src/host/small-spawner.ts";

describe("commands started from the small process", () => {
  const spawner = new SmallSpawner();
  after(() => spawner.close());

  test("a command is forked by the small process, not by kpng, and its result comes back", async () => {
    const r = await spawner.exec(["sh", "-c", 'echo "$PPID"; echo oops >&2; exit 3'], { timeoutMs: 10_000 });
    assert.equal(r.stdout.trim(), String(spawner.pid));
    assert.notEqual(spawner.pid, process.pid);
    assert.deepEqual([r.code, r.stderr, r.timedOut], [3, "oops\n", false]);
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

  test("if the small process dies, the call in flight fails and the next one starts it again", async () => {
    const first = spawner.pid;
    const inFlight = spawner.exec(["sleep", "30"], { timeoutMs: 20_000 });
    process.kill(first ?? 0, "SIGKILL");
    await assert.rejects(inFlight, /exited/);
    const r = await spawner.exec(["sh", "-c", 'echo "$PPID"'], { timeoutMs: 10_000 });
    assert.notEqual(spawner.pid, first);
    assert.equal(r.stdout.trim(), String(spawner.pid));
  });
});
