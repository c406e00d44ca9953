import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { NftRulesProbe, probeCommands } from "../../../../src/backends/nft/rules-probe.ts";

const CFG = {
  family: "ip" as const,
  table: "kpng",
  nodePortCIDRs: [],
  podCIDRs: [],
  masqueradeAll: false,
  nodeIPs: [],
};

/**
 * A fake nft that knows only dry-run deletions (`nft -c -f -`): it answers each as the kernel
 * would from `answers` (command → "busy", "allowed" or "missing"), and refuses anything else,
 * as listing a chain at 100k Services would take minutes.
 */
function fakeNft(dir: string, answers: Record<string, "busy" | "allowed" | "missing">): string[] {
  const script = join(dir, "fake-nft.mjs");
  writeFileSync(
    script,
    `const args = process.argv.slice(2).join(" ");
const answers = ${JSON.stringify(answers)};
if (args !== "-c -f -") { process.stderr.write("asked for " + args); process.exit(1); }
let input = "";
process.stdin.on("data", (b) => { input += b; });
process.stdin.on("end", () => {
  const answer = answers[input.trim()];
  if (answer === "allowed") process.exit(0);
  const why = answer === "busy" ? "Device or resource busy" : "No such file or directory";
  process.stderr.write("/dev/stdin:1:1-5: Error: Could not process rule: " + why + "\\n" + input);
  process.exit(1);
});
`,
  );
  return [process.execPath, script];
}

test("the probe dry-runs deleting the objects only kpng's own rules use: busy means intact", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-probe-"));
  try {
    const [chain = "", map = ""] = probeCommands(CFG);
    assert.equal(chain, "delete chain ip kpng services");
    assert.equal(map, "delete map ip kpng service-ips");
    const probe = (answers: Record<string, "busy" | "allowed" | "missing">) =>
      new NftRulesProbe([CFG], fakeNft(dir, answers)).intact("ip");
    assert.equal(await probe({ [chain]: "busy", [map]: "busy" }), true, "in place");
    // `nft flush table ip kpng`: the base chains no longer jump to services.
    assert.equal(await probe({ [chain]: "allowed", [map]: "allowed" }), false, "flushed table");
    // `nft flush chain ip kpng services`: nothing looks up service-ips any more.
    assert.equal(await probe({ [chain]: "busy", [map]: "allowed" }), false, "flushed chain");
    // `nft flush ruleset`: the table is gone.
    assert.equal(await probe({}), false, "deleted table");
    assert.equal(await new NftRulesProbe([CFG], fakeNft(dir, {})).intact("ip6"), true, "not ours");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a probe that cannot run rejects rather than reporting a loss", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-probe-"));
  try {
    const script = join(dir, "broken-nft.mjs");
    writeFileSync(script, `process.stderr.write("boom"); process.exit(3);`);
    await assert.rejects(new NftRulesProbe([CFG], [process.execPath, script]).intact("ip"), /boom/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
