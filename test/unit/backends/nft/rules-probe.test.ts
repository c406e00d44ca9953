import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { chainsOfTable, NftRulesProbe } from "../../../../src/backends/nft/rules-probe.ts";

const LISTING = `table ip other {
\tchain services {
\t}
}
table ip kpng {
\tchain services {
\t}
\tchain nat-prerouting {
\t\ttype nat hook prerouting priority dstnat; policy accept;
\t}
}
`;

test("chainsOfTable: the chains of the named table only, from nft list chains", () => {
  assert.deepEqual([...chainsOfTable(LISTING, "ip", "kpng")], ["services", "nat-prerouting"]);
  assert.deepEqual([...chainsOfTable(LISTING, "ip", "other")], ["services"]);
  assert.deepEqual([...chainsOfTable(LISTING, "ip6", "kpng")], []);
  assert.deepEqual([...chainsOfTable("", "ip", "kpng")], []);
});

/**
 * A fake nft for a table of 100k Services: `list chains` answers at once, while listing any
 * chain's rules makes nft fetch every set element first (minutes), which the fake refuses.
 */
function fakeNft(dir: string, listing: string): string[] {
  const script = join(dir, "fake-nft.mjs");
  writeFileSync(
    script,
    `const args = process.argv.slice(2).join(" ");
if (args === "list chains ip") { process.stdout.write(${JSON.stringify(listing)}); process.exit(0); }
process.stderr.write("asked for " + args + ": every set element would be fetched first");
process.exit(1);
`,
  );
  return [process.execPath, script];
}

test("the probe reads chain declarations only, never a chain's rules", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kpng-probe-"));
  try {
    const cfg = {
      family: "ip" as const,
      table: "kpng",
      nodePortCIDRs: [],
      podCIDRs: [],
      masqueradeAll: false,
      nodeIPs: [],
    };
    assert.equal(await new NftRulesProbe([cfg], fakeNft(dir, LISTING)).intact(), true);
    const flushed = "table ip other {\n\tchain services {\n\t}\n}\n";
    assert.equal(await new NftRulesProbe([cfg], fakeNft(dir, flushed)).intact(), false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
