import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { LocalService, LocalState } from "../../../src/model/local.ts";
import { changedServiceKeys, ServiceChangeLog, serviceChanges } from "../../../src/model/local-changes.ts";

const svc = (name: string): LocalService => ({ name }) as unknown as LocalService;

function state(
  revision: number,
  services: Record<string, LocalService>,
  changeLog?: ServiceChangeLog,
): LocalState {
  return {
    node: "n1",
    revision,
    services: new Map(Object.entries(services)),
    serviceCIDRs: { IPv4: [], IPv6: [] },
    changeLog,
  };
}

describe("ServiceChangeLog", () => {
  const log = new ServiceChangeLog({ maxRevisions: 3 });
  log.record(1, new Set(["a"]));
  log.record(2, new Set(["b"]));
  log.record(3, new Set(["a", "c"]));
  log.record(4, new Set(["d"]));
  const cases: [string, number, number, string[] | undefined][] = [
    ["one revision on is that revision's keys", 3, 4, ["d"]],
    ["several revisions on are the union of their keys", 1, 4, ["a", "b", "c", "d"]],
    ["the same revision changed nothing", 4, 4, []],
    ["a revision before the kept ones is unknown", 0, 4, undefined],
    ["a revision not yet recorded is unknown", 3, 5, undefined],
    ["going backwards is unknown", 4, 3, undefined],
  ];
  for (const [rule, from, to, want] of cases) {
    it(rule, () => {
      const got = log.between(from, to);
      assert.deepEqual(got === undefined ? undefined : [...got].sort(), want);
    });
  }

  it("forgets the oldest revisions past the key budget", () => {
    const small = new ServiceChangeLog({ maxKeys: 3 });
    small.record(1, new Set(["a", "b"]));
    small.record(2, new Set(["c", "d"]));
    assert.equal(small.between(0, 2), undefined);
    assert.deepEqual([...small.between(1, 2)!], ["c", "d"]);
  });

  it("starts over after a gap in revisions", () => {
    const gap = new ServiceChangeLog();
    gap.record(1, new Set(["a"]));
    gap.record(5, new Set(["b"]));
    assert.equal(gap.between(0, 5), undefined);
    assert.deepEqual([...gap.between(4, 5)!], ["b"]);
  });
});

describe("changedServiceKeys", () => {
  const a = svc("a");
  const b = svc("b");
  const b2 = svc("b2");
  it("names every service of the first state (added)", () => {
    assert.deepEqual([...changedServiceKeys(undefined, state(1, { a, b }))].sort(), ["a", "b"]);
  });

  it("uses the log shared by both states: a change and a removal", () => {
    const log = new ServiceChangeLog();
    log.record(1, new Set(["a", "b"]));
    log.record(2, new Set(["b", "c"]));
    const s1 = state(1, { a, b }, log);
    // The maps say more changed (a is a new object), but the log is what is read.
    const s2 = state(2, { a: svc("a"), b: b2 }, log);
    assert.deepEqual([...changedServiceKeys(s1, s2)].sort(), ["b", "c"]);
    assert.deepEqual(
      [...serviceChanges(s1, s2)].map(([k, x, y]) => [k, x?.name, y?.name]),
      [["b", "b", "b2"]],
    );
  });

  it("falls back to comparing the maps when the log has forgotten (a resync)", () => {
    const log = new ServiceChangeLog({ maxRevisions: 1 });
    log.record(1, new Set(["a"]));
    log.record(2, new Set(["b"]));
    log.record(3, new Set(["c"]));
    const s1 = state(1, { a, b }, log);
    const s3 = state(3, { a, b: b2, c: svc("c") }, log);
    assert.deepEqual([...changedServiceKeys(s1, s3)].sort(), ["b", "c"]);
  });

  it("falls back to comparing the maps for states of two producers", () => {
    const s1 = state(7, { a, b }, new ServiceChangeLog());
    const s2 = state(1, { b }, new ServiceChangeLog());
    assert.deepEqual([...changedServiceKeys(s1, s2)], ["a"]);
  });
});
