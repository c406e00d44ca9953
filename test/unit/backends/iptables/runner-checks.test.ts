import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ExecIptablesRunner } from "../../../../src/backends/iptables/runner.ts";

/** An iptables that answers each check with the exit code and output iptables 1.8.9 gives. */
function fakeIptables(dir: string): string[] {
  const script = join(dir, "fake-iptables.mjs");
  writeFileSync(
    script,
    `const args = process.argv.slice(3).join(" ");
const answers = {
  "-w 5 -t nat -S KPNG-SERVICES 1": [0, "-A KPNG-SERVICES -d 127.0.0.0/8 -j RETURN\\n", ""],
  "-w 5 -t nat -S KPNG-EMPTY 1": [0, "", ""],
  "-w 5 -t nat -S KPNG-GONE 1": [1, "", "iptables: No chain/target/match by that name.\\n"],
  "-w 5 -t nat -C PREROUTING -j KPNG-SERVICES": [0, "", ""],
  "-w 5 -t nat -C OUTPUT -j KPNG-SERVICES": [1, "", "iptables: Bad rule (does a matching rule exist in that chain?).\\n"],
  "-w 5 -t nat -C INPUT -j KPNG-GONE": [2, "", "iptables v1.8.9 (nf_tables): Chain 'KPNG-GONE' does not exist\\n"],
  "-w 5 -t nat -C POSTROUTING -j KPNG-GONE": [2, "", "iptables v1.8.9 (legacy): Couldn't load target \`KPNG-GONE':No such file or directory\\n"],
};
const [code, out, err] = answers[args] ?? [4, "", "Another app is currently holding the xtables lock.\\n"];
process.stdout.write(out);
process.stderr.write(err);
process.exit(code);
`,
  );
  return [process.execPath, script];
}

test("rule checks: present, empty, missing chain or rule, a jump to a deleted chain; a lock is a failure to check", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-iptables-checks-"));
  try {
    const runner = new ExecIptablesRunner("nft", { prefix: fakeIptables(dir) });
    assert.equal(await runner.hasRules("IPv4", "nat", "KPNG-SERVICES"), true);
    assert.equal(await runner.hasRules("IPv4", "nat", "KPNG-EMPTY"), false, "flushed");
    assert.equal(await runner.hasRules("IPv4", "nat", "KPNG-GONE"), false, "deleted");
    assert.equal(await runner.hasRule("IPv4", "nat", "PREROUTING", "-j KPNG-SERVICES"), true);
    assert.equal(await runner.hasRule("IPv4", "nat", "OUTPUT", "-j KPNG-SERVICES"), false);
    assert.equal(await runner.hasRule("IPv4", "nat", "INPUT", "-j KPNG-GONE"), false);
    assert.equal(await runner.hasRule("IPv4", "nat", "POSTROUTING", "-j KPNG-GONE"), false);
    await assert.rejects(runner.hasRules("IPv4", "filter", "KPNG-SERVICES"), /xtables lock/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
