import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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
 * A fake nft that knows only dry-run deletions, as `nft -c -f -` or as a long-lived `nft -c -i`
 * (one transaction per line, then the runner's marker): it answers each as the kernel would from
 * `answers` (command → "busy", "allowed" or "missing"), and refuses anything else, as listing a
 * chain at 100k Services would take minutes. Each start appends a line to `starts`.
 */
function fakeNft(
  dir: string,
  answers: Record<string, "busy" | "allowed" | "missing">,
  interactive = true,
): string[] {
  const script = join(dir, "fake-nft.mjs");
  writeFileSync(
    script,
    `import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";
const args = process.argv.slice(2).join(" ");
const answers = ${JSON.stringify(answers)};
appendFileSync(${JSON.stringify(join(dir, "starts"))}, args + "\\n");
const answer = (command) => {
  if (command.startsWith("list table ip kpng-sync-marker-")) return "missing";
  return answers[command.trim()] ?? "missing";
};
const refusal = (why, command) => "Error: Could not process rule: " + why + "\\n" + command + "\\n^^^^\\n";
if (args === "-c -i" && ${interactive}) {
  createInterface({ input: process.stdin }).on("line", (command) => {
    appendFileSync(${JSON.stringify(join(dir, "lines"))}, command + "\\n");
    if (command.trim() === "") return; // nft says nothing to an empty line
    const a = answer(command);
    if (a !== "allowed")
      process.stderr.write(refusal(a === "busy" ? "Device or resource busy" : "No such file or directory", command));
  });
} else if (args === "-c -f -") {
  let input = "";
  process.stdin.on("data", (b) => { input += b; });
  process.stdin.on("end", () => {
    const a = answer(input);
    if (a === "allowed") process.exit(0);
    process.stderr.write(refusal(a === "busy" ? "Device or resource busy" : "No such file or directory", input));
    process.exit(1);
  });
} else {
  process.stderr.write("asked for " + args);
  process.exit(1);
}
`,
  );
  return [process.execPath, script];
}

const starts = (dir: string): string[] => readFileSync(join(dir, "starts"), "utf8").trim().split("\n");

for (const interactive of [true, false]) {
  test(`the probe dry-runs deleting the objects only kpng's own rules use: busy means intact (${interactive ? "nft -c -i" : "nft -c -i fails: nft -c -f"})`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "kpng-probe-"));
    const probes: NftRulesProbe[] = [];
    try {
      const [chain = "", map = ""] = probeCommands(CFG);
      assert.equal(chain, "delete chain ip kpng services");
      assert.equal(map, "delete map ip kpng service-ips");
      const probe = (answers: Record<string, "busy" | "allowed" | "missing">) => {
        const p = new NftRulesProbe([CFG], fakeNft(dir, answers, interactive));
        probes.push(p);
        return p.intact("ip");
      };
      assert.equal(await probe({ [chain]: "busy", [map]: "busy" }), true, "in place");
      // `nft flush table ip kpng`: the base chains no longer jump to services.
      assert.equal(await probe({ [chain]: "allowed", [map]: "allowed" }), false, "flushed table");
      // `nft flush chain ip kpng services`: nothing looks up service-ips any more.
      assert.equal(await probe({ [chain]: "busy", [map]: "allowed" }), false, "flushed chain");
      // `nft flush ruleset`: the table is gone.
      assert.equal(await probe({}), false, "deleted table");
      assert.equal(await new NftRulesProbe([CFG], fakeNft(dir, {})).intact("ip6"), true, "not ours");
    } finally {
      for (const p of probes) p.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test("one nft -c -i process answers every check: no nft started per check, one round trip per family", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-probe-"));
  const [chain = "", map = ""] = probeCommands(CFG);
  const probe = new NftRulesProbe([CFG], fakeNft(dir, { [chain]: "busy", [map]: "busy" }));
  try {
    for (let i = 0; i < 5; i++) assert.equal(await probe.intact("ip"), true);
    assert.deepEqual(starts(dir), ["-c -i"]);
    const lines = readFileSync(join(dir, "lines"), "utf8").trim().split("\n");
    assert.equal(lines.filter((l) => l === chain).length, 5);
    assert.equal(lines.filter((l) => l === map).length, 5);
    assert.equal(lines.filter((l) => l.includes("marker")).length, 5, "one marker after both checks");
  } finally {
    probe.close();
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

test("prepare() starts `nft -c -i` before the first check, which then starts nothing more", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-probe-"));
  const [chain = "", map = ""] = probeCommands(CFG);
  const probe = new NftRulesProbe([CFG], fakeNft(dir, { [chain]: "busy", [map]: "busy" }));
  try {
    await probe.prepare();
    assert.deepEqual(starts(dir), ["-c -i"], "started by prepare(), before any check");
    assert.equal(await probe.intact("ip"), true);
    assert.deepEqual(starts(dir), ["-c -i"]);
  } finally {
    probe.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
