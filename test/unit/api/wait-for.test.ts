// A stream waits for the next revision once per change: however many waits a stream's signal has
// seen, it carries one abort listener, and aborting ends every wait still pending on it.

import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { test } from "node:test";
import { waitFor } from "../../../src/api/watch-stream.ts";

/** A state that changes when told: subscribe/notify as NodeStates.onChange does. */
function changing() {
  const listeners = new Set<() => void>();
  let value = 0;
  return {
    get value() {
      return value;
    },
    subscribe: (l: () => void) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    bump() {
      value++;
      for (const l of [...listeners]) l();
    },
    get listeners() {
      return listeners.size;
    },
  };
}

test("1,000 waits in turn on one signal leave at most one abort listener and no state listener", async () => {
  const state = changing();
  const abort = new AbortController();
  for (let i = 1; i <= 1000; i++) {
    const waiting = waitFor(() => state.value >= i, state.subscribe, abort.signal);
    state.bump();
    assert.equal(await waiting, true);
  }
  assert.ok(getEventListeners(abort.signal, "abort").length <= 1);
  assert.equal(state.listeners, 0);
});

test("aborting ends every pending wait with false, on each of their signals alone", async () => {
  const state = changing();
  const [one, two] = [new AbortController(), new AbortController()];
  const first = [1, 2, 3].map(() => waitFor(() => state.value > 0, state.subscribe, one.signal));
  const second = waitFor(() => state.value > 0, state.subscribe, two.signal);
  one.abort();
  assert.deepEqual(await Promise.all(first), [false, false, false]);
  assert.equal(state.listeners, 1, "the other signal's wait still waits");
  state.bump();
  assert.equal(await second, true);
  assert.equal(
    await waitFor(() => false, state.subscribe, one.signal),
    false,
    "an aborted signal waits for nothing",
  );
});
