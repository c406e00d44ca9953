import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type ActivationState, INACTIVE, step } from "../../../../src/controllers/fallback/activation.ts";

/** One observation on the fake clock: at `t` seconds the primary / fallback have a ready endpoint or not. */
interface Tick {
  readonly t: number;
  readonly primary: boolean;
  readonly fallback: boolean;
  /** The primary has an endpoint terminating but still serving (none ready): a stock proxy uses it. */
  readonly terminatingServing?: boolean;
  /** Whether the Service is on its fallback after this observation. */
  readonly active: boolean;
}

interface Row {
  readonly name: string;
  readonly delay: number;
  readonly ticks: readonly Tick[];
}

const rows: Row[] = [
  {
    name: "the primary's last pods terminate but still serve: the switch waits until they are gone (a stock proxy would mix them)",
    delay: 10,
    ticks: [
      { t: 0, primary: true, fallback: true, active: false },
      { t: 1, primary: false, terminatingServing: true, fallback: true, active: false },
      { t: 20, primary: false, terminatingServing: true, fallback: true, active: false },
      { t: 31, primary: false, fallback: true, active: true },
    ],
  },
  {
    name: "the primary's last ready endpoint goes: the fallback takes over at once",
    delay: 10,
    ticks: [
      { t: 0, primary: true, fallback: true, active: false },
      { t: 1, primary: false, fallback: true, active: true },
    ],
  },
  {
    name: "no ready fallback: nothing to switch to",
    delay: 10,
    ticks: [{ t: 0, primary: false, fallback: false, active: false }],
  },
  {
    name: "the primary comes back: traffic returns only after the whole return delay",
    delay: 10,
    ticks: [
      { t: 0, primary: false, fallback: true, active: true },
      { t: 5, primary: true, fallback: true, active: true },
      { t: 14.9, primary: true, fallback: true, active: true },
      { t: 15, primary: true, fallback: true, active: false },
    ],
  },
  {
    name: "a primary that drops during the return delay starts it over",
    delay: 10,
    ticks: [
      { t: 0, primary: false, fallback: true, active: true },
      { t: 1, primary: true, fallback: true, active: true },
      { t: 9, primary: false, fallback: true, active: true },
      { t: 10, primary: true, fallback: true, active: true },
      { t: 19, primary: true, fallback: true, active: true },
      { t: 20, primary: true, fallback: true, active: false },
    ],
  },
  {
    name: "return delay 0: back to the primary as soon as it is ready",
    delay: 0,
    ticks: [
      { t: 0, primary: false, fallback: true, active: true },
      { t: 1, primary: true, fallback: true, active: false },
    ],
  },
  {
    name: "neither has a ready endpoint: the fallback is dropped at once",
    delay: 10,
    ticks: [
      { t: 0, primary: false, fallback: true, active: true },
      { t: 1, primary: false, fallback: false, active: false },
      { t: 2, primary: false, fallback: true, active: true },
    ],
  },
  {
    name: "while the primary is ready a fallback going away changes nothing until the delay ends",
    delay: 10,
    ticks: [
      { t: 0, primary: false, fallback: true, active: true },
      { t: 1, primary: true, fallback: false, active: true },
      { t: 11, primary: true, fallback: false, active: false },
    ],
  },
];

function run(
  delay: number,
  ticks: readonly Omit<Tick, "active">[],
): { states: boolean[]; switches: number; recheck: (number | undefined)[] } {
  let state: ActivationState = INACTIVE;
  let switches = 0;
  const states: boolean[] = [];
  const recheck: (number | undefined)[] = [];
  for (const tick of ticks) {
    const next = step(state, {
      primaryReady: tick.primary,
      primaryServing: tick.primary || tick.terminatingServing === true,
      fallbackReady: tick.fallback,
      now: tick.t * 1000,
      returnDelayMs: delay * 1000,
    });
    if (next.switched) switches++;
    state = next.state;
    states.push(state.active);
    recheck.push(next.recheckAt);
  }
  return { states, switches, recheck };
}

describe("fallback activation", () => {
  for (const row of rows) {
    test(row.name, () => {
      assert.deepEqual(
        run(row.delay, row.ticks).states,
        row.ticks.map((t) => t.active),
      );
    });
  }

  test("while waiting to return, a recheck is asked for when the delay runs out", () => {
    const { recheck } = run(10, [
      { t: 0, primary: false, fallback: true },
      { t: 3, primary: true, fallback: true },
      { t: 4, primary: true, fallback: true },
    ]);
    assert.deepEqual(recheck, [undefined, 13_000, 13_000]);
  });

  test("a primary flapping every second for a minute: at most 2 switches per return delay", () => {
    const ticks = Array.from({ length: 61 }, (_, t) => ({ t, primary: t % 2 === 1, fallback: true }));
    ticks.push({ t: 80, primary: true, fallback: true }, { t: 90, primary: true, fallback: true });
    const { states, switches } = run(10, ticks);
    assert.ok(switches <= 2 * Math.ceil(90 / 10), `switches ${switches}`);
    assert.equal(switches, 2, "activated once, returned once after the flapping stopped");
    assert.equal(states.at(-1), false);
  });
});
