// The node's addresses read with `ip -j`, started by the small process when kpng gives one: the
// answers read the same, and `ip` is the small process's child, not kpng's (a fork of kpng costs
// in proportion to its memory). A fake `ip` first in PATH answers and records its parent.

import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { IpCommandHost } from "../../../src/host/host-network.ts";
import { SmallSpawner } from "../../../src/host/small-spawner.ts";

const dir = mkdtempSync(join(tmpdir(), "kpng-ip-"));
const parents = join(dir, "parents");
writeFileSync(
  join(dir, "ip"),
  [
    "#!/bin/sh",
    `echo "$PPID" >> '${parents}'`,
    'case "$*" in',
    `"-j addr show") echo '[{"ifname":"lo","addr_info":[{"local":"127.0.0.1","scope":"host"}]},{"ifname":"eth0","addr_info":[{"local":"192.0.2.7","scope":"global"}]}]' ;;`,
    `"-j -4 route show default") echo '[{"dev":"eth0","gateway":"192.0.2.1"}]' ;;`,
    "*) echo '[]' ;;",
    "esac",
    "",
  ].join("\n"),
);
chmodSync(join(dir, "ip"), 0o755);
const path = process.env.PATH;
process.env.PATH = `${dir}:${path ?? ""}`;
// Forked with the fake first in its PATH.
const spawner = new SmallSpawner();
after(() => {
  spawner.close();
  process.env.PATH = path;
  rmSync(dir, { recursive: true, force: true });
});

test("started by the small process, `ip` answers as it would to kpng, and is the small process's child", async () => {
  const host = new IpCommandHost(spawner);
  assert.deepEqual(await host.interfaces(), [
    { ifname: "lo", addresses: [{ ip: "127.0.0.1", scope: "host" }] },
    { ifname: "eth0", addresses: [{ ip: "192.0.2.7", scope: "global" }] },
  ]);
  assert.deepEqual(await host.defaultRouteInterfaces(), ["eth0"]);
  assert.deepEqual(await host.defaultGateways(), ["192.0.2.1"]);
  const started = readFileSync(parents, "utf8").trim().split("\n");
  // One `ip` for the interfaces, two (IPv4, IPv6) for each look at the default routes.
  assert.equal(started.length, 5);
  for (const parent of started)
    assert.equal(parent, String(spawner.pid), "forked by the small process, not by kpng");
});

test("without the small process, kpng starts `ip` itself", async () => {
  rmSync(parents, { force: true });
  assert.deepEqual(await new IpCommandHost().defaultGateways(), ["192.0.2.1"]);
  assert.deepEqual(readFileSync(parents, "utf8").trim().split("\n"), [
    String(process.pid),
    String(process.pid),
  ]);
});
