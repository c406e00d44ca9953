// A Clock (src/model/clock.ts) that moves only when a test says so.

import type { Clock } from "../../src/model/clock.ts";

interface Timer {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
}

/** Lets promise chains started by a callback run before time moves on. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

export class FakeClock implements Clock {
  #now: number;
  #seq = 0;
  #timers: Timer[] = [];

  constructor(start = 1_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t !== timer);
    };
  }

  /** Timers waiting to fire. */
  get pending(): number {
    return this.#timers.length;
  }

  /** Moves time forward by ms, firing every timer that falls due on the way, in order. */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    await settle();
    for (;;) {
      const next = [...this.#timers].sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (next === undefined || next.at > end) break;
      this.#timers = this.#timers.filter((t) => t !== next);
      this.#now = Math.max(this.#now, next.at);
      next.fn();
      await settle();
    }
    this.#now = end;
    await settle();
  }
}
