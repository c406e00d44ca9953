import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Interner } from "../../../../src/controllers/fallback/interner.ts";

describe("string interner", () => {
  test("equal strings come back as the first copy; label maps keep their content", () => {
    const strings = new Interner();
    const first = ["node", "1"].join("-");
    assert.equal(strings.intern(first), first);
    assert.equal(strings.intern(["node", "1"].join("-")), first);
    assert.deepEqual(strings.labels({ app: "web", tier: "db" }), { app: "web", tier: "db" });
  });

  test("the table is bounded: unique values start it over instead of piling up", () => {
    const strings = new Interner();
    for (let i = 0; i < 200_000; i++) assert.equal(strings.intern(`uid-${i}`), `uid-${i}`);
  });
});
