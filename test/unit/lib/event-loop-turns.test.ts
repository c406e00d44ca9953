import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EventLoopTurns } from "../../../src/lib/event-loop-turns.ts";

/** A clock the test moves. */
function fakeClock(start = 1000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

describe("EventLoopTurns", () => {
  test("within the slice there is nothing to await", () => {
    const clock = fakeClock();
    const turns = new EventLoopTurns(20, clock.now);
    clock.advance(19);
    assert.equal(turns.due(), undefined);
  });

  test("a used-up slice gives the event loop a turn: work queued before it runs first", async () => {
    const clock = fakeClock();
    const turns = new EventLoopTurns(20, clock.now);
    const ran: string[] = [];
    setImmediate(() => ran.push("queued work"));
    clock.advance(20);
    const turn = turns.due();
    assert.ok(turn, "the slice is used up");
    await turn;
    ran.push("after the turn");
    assert.deepEqual(ran, ["queued work", "after the turn"]);
  });

  test("the next slice starts when the turn is over", async () => {
    const clock = fakeClock();
    const turns = new EventLoopTurns(20, clock.now);
    clock.advance(25);
    await turns.due();
    clock.advance(19);
    assert.equal(turns.due(), undefined);
    clock.advance(1);
    assert.ok(turns.due());
  });
});
