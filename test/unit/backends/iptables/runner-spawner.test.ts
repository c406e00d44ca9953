// iptables started by the small process: restore input reaches iptables-restore whole, in a file
// named as its last argument and removed afterwards, and every command (restores, the checks the
// probe makes every few seconds) is the small process's child, not kpng's.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { dirname } from "node:path";
import { after, test } from "node:test";
import { ExecIptablesRunner, IptablesError } from "../../../../src/backends/iptables/runner.ts";
import { SmallSpawner } from "../../../../src/host/small-spawner.ts";

/**
 * Stands for iptables ($1 is the binary's name): a restore reports its last argument's size,
 * path and its parent on stderr and fails; anything else prints its parent as a rule.
 */
const REPORTING_IPTABLES = [
  "sh",
  "-c",
  [
    'for a; do last="$a"; done',
    'case "$1" in',
    '*-restore) echo "bytes $(wc -c < "$last") parent $PPID file $last" >&2; exit 1 ;;',
    '*) echo "-A KPNG-SERVICES parent $PPID" ;;',
    "esac",
  ].join("\n"),
  "iptables",
];

const spawner = new SmallSpawner();
after(() => spawner.close());

test("a restore started by the small process gets its input whole in a file, which then goes", async () => {
  const runner = new ExecIptablesRunner("nft", { prefix: REPORTING_IPTABLES, spawner });
  const text = `*nat\n${"-A KPNG-SVC-X -j DNAT --to-destination 10.0.0.1:80\n".repeat(20_000)}COMMIT\n`;
  const err = await runner.restore("IPv4", text).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(err instanceof IptablesError, String(err));
  assert.match(err.message, /^iptables-restore failed: bytes \d+ parent \d+/);
  const [, bytes, parent, file = ""] = /bytes (\d+) parent (\d+) file (\S+)/.exec(err.stderr) ?? [];
  assert.equal(Number(bytes), Buffer.byteLength(text));
  assert.equal(parent, String(spawner.pid), "forked by the small process, not by kpng");
  assert.match(file, /kpng-iptables-.*restore$/);
  assert.equal(existsSync(dirname(file)), false, "the input's directory is removed");
});

test("the probe's checks are started by the small process too", async () => {
  const runner = new ExecIptablesRunner("nft", { prefix: REPORTING_IPTABLES, spawner });
  assert.equal(await runner.hasRules("IPv4", "nat", "KPNG-SERVICES"), true);
  const rules = await runner.rulesWithCounters("IPv4", "nat", "KPNG-SERVICES");
  assert.equal(rules.trim(), `-A KPNG-SERVICES parent ${spawner.pid}`);
});

test("without the small process, kpng starts them itself, with the input on stdin", async () => {
  const runner = new ExecIptablesRunner("nft", {
    prefix: ["sh", "-c", 'echo "parent $PPID"; cat >&2; exit 1', "iptables"],
  });
  const err = (await runner.restore("IPv4", "*nat\nCOMMIT\n").catch((e: unknown) => e)) as IptablesError;
  assert.equal(err.stderr, "*nat\nCOMMIT\n");
  assert.equal((await runner.rulesWithCounters("IPv4", "nat", "X")).trim(), "");
});
