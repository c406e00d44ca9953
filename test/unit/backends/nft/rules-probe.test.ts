import assert from "node:assert/strict";
import { test } from "node:test";
import { chainsOfTable } from "../../../../src/backends/nft/rules-probe.ts";

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
