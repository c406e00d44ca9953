import assert from "node:assert/strict";
import { test } from "node:test";
import { FakeNft } from "../../support/fake-nft.ts";

const BASE =
  "add table ip t\nadd chain ip t a\nadd map ip t m { type inet_proto . inet_service : verdict; }\nadd set ip t s { type ipv4_addr; }\n";

const rejected: Array<{ name: string; text: string }> = [
  { name: "a rule jumping to a missing chain", text: "add rule ip t a jump nowhere" },
  { name: "a rule using a missing set", text: "add rule ip t a ip saddr @nowhere drop" },
  {
    name: "a map element whose verdict targets a missing chain",
    text: "add element ip t m { tcp . 80 : goto nowhere }",
  },
  { name: "deleting a missing chain", text: "delete chain ip t nowhere" },
  {
    name: "deleting a chain still referenced by a rule",
    text: "add chain ip t b\nadd rule ip t a goto b\ndelete chain ip t b",
  },
  {
    name: "deleting a chain still referenced by an element",
    text: "add chain ip t b\nadd element ip t m { tcp . 1 : goto b }\ndelete chain ip t b",
  },
  { name: "deleting a set a rule uses", text: "add rule ip t a ip saddr @s drop\ndelete set ip t s" },
  { name: "deleting a missing element", text: "delete element ip t s { 192.0.2.1 }" },
  {
    name: "adding an element again with another value",
    text: "add element ip t m { tcp . 1 : drop }\nadd element ip t m { tcp . 1 : accept }",
  },
  { name: "a statement it cannot parse", text: "frobnicate ip t" },
];

for (const c of rejected) {
  test(`rejects ${c.name}, atomically`, async () => {
    const nft = new FakeNft();
    await nft.run(BASE);
    const before = nft.dump();
    await assert.rejects(nft.run(`add chain ip t partial\n${c.text}\n`));
    assert.equal(nft.dump(), before, "nothing of the failed transaction is applied");
  });
}

test("accepts a consistent transaction and lists it back as nft JSON", async () => {
  const nft = new FakeNft();
  await nft.run(
    `${BASE}add chain ip t b\nadd rule ip t a goto b\nadd element ip t m { tcp . 80 : goto b, udp . 53 : drop }\n`,
  );
  assert.deepEqual(nft.rules("ip", "t", "a"), ["goto b"]);
  const listing = JSON.parse(String(await nft.list("ip", "t", { kind: "map", name: "m" }))) as {
    nftables: unknown[];
  };
  assert.ok(
    listing.nftables.some(
      (i) =>
        JSON.stringify(i).includes('"concat":["tcp",80]') &&
        JSON.stringify(i).includes('"goto":{"target":"b"}'),
    ),
  );
  assert.equal(await nft.list("ip", "missing", { objects: "sets" }), undefined);
  assert.equal(await nft.list("ip", "t", { kind: "map", name: "missing" }), undefined);
  const maps = String(await nft.list("ip", "t", { objects: "maps" }));
  assert.ok(maps.includes('"name":"m"') && !maps.includes("concat"), "declarations without elements");
});

test("check() validates without applying", async () => {
  const nft = new FakeNft();
  await nft.check(BASE);
  assert.equal(nft.hasTable("ip", "t"), false);
  await assert.rejects(nft.check("add rule ip t a accept"));
});
