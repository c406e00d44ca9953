// Fault: a second `to-api` on the unix socket of a live one silently unlinked it and took over;
// and a socket in a missing directory was reported as EACCES.

import assert from "node:assert/strict";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, test } from "node:test";
import { ApiServer } from "../../src/api/server.ts";
import { silentLogger } from "../../src/observability/log.ts";
import { UsageError } from "../../src/plugin/usage-error.ts";
import { FakeBrain } from "../unit/api/fixtures.ts";

describe("fault: taking over a live unix socket", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "kpng-fault-sock-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const server = (path: string) => {
    const brain = new FakeBrain();
    brain.update("n1", []);
    return new ApiServer({ listen: [`unix://${path}`], localFeed: brain.feed, log: silentLogger });
  };

  test("a second server on a live socket refuses with a usage error naming the holder; the first keeps it", async () => {
    const path = join(dir, "proxy.sock");
    const first = server(path);
    await first.start();
    try {
      const before = (await stat(path)).ino;
      await assert.rejects(server(path).start(), (e: Error) => {
        assert.ok(e instanceof UsageError, "exit 2");
        assert.match(e.message, new RegExp(`socket is held by pid ${process.pid} \\(`));
        return true;
      });
      assert.equal((await stat(path)).ino, before, "the socket file was not replaced");
    } finally {
      await first.stop();
    }
  });

  test("a socket held by another program is refused too", async () => {
    const path = join(dir, "other.sock");
    const other = createServer();
    await new Promise<void>((r) => other.listen(path, r));
    try {
      await assert.rejects(server(path).start(), /socket is held by pid/);
    } finally {
      await new Promise((r) => other.close(r));
    }
  });

  test("a stale socket (its server gone) is replaced", async () => {
    const path = join(dir, "stale.sock");
    const crashed = server(path);
    await crashed.start();
    crashed.forceStop(); // leaves the file, as a crash would
    const next = server(path);
    await next.start();
    await next.stop();
  });

  test("a socket in a directory that does not exist says so (not EACCES)", async () => {
    const path = join(dir, "missing", "proxy.sock");
    await assert.rejects(server(path).start(), (e: Error) => {
      assert.match(e.message, /the directory .*missing does not exist/);
      assert.doesNotMatch(e.message, /EACCES/);
      return true;
    });
  });
});
