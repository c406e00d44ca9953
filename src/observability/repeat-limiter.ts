// Decides when a failure that keeps recurring is logged again: the first time, then at
// exponentially spaced repeats (2nd, 4th, 8th, …) and at least once per `maxQuietMs`, so a
// persistent failure costs a few lines an hour instead of one per retry, and a new failure is
// always logged at once.

interface RepeatDecision {
  readonly log: boolean;
  /** Occurrences of this failure so far, this one included. */
  readonly count: number;
  /** Occurrences not logged since the last logged one. */
  readonly suppressed: number;
}

export class RepeatLimiter {
  readonly #maxQuietMs: number;
  readonly #now: () => number;
  #key: string | undefined;
  #count = 0;
  #loggedAt = 0;
  #loggedCount = 0;

  constructor(options: { maxQuietMs?: number; now?: () => number } = {}) {
    this.#maxQuietMs = options.maxQuietMs ?? 10 * 60_000;
    this.#now = options.now ?? Date.now;
  }

  /** Counts one occurrence of the failure named `key`; a different key starts over. */
  hit(key: string): RepeatDecision {
    const now = this.#now();
    if (key !== this.#key) {
      this.#key = key;
      this.#count = 0;
      this.#loggedCount = 0;
    }
    this.#count++;
    const powerOfTwo = (this.#count & (this.#count - 1)) === 0;
    const log = this.#count === 1 || powerOfTwo || now - this.#loggedAt >= this.#maxQuietMs;
    const suppressed = this.#count - this.#loggedCount - 1;
    if (log) {
      this.#loggedAt = now;
      this.#loggedCount = this.#count;
    }
    return { log, count: this.#count, suppressed };
  }

  /** The failure is over: the next one is logged at once. */
  reset(): void {
    this.#key = undefined;
    this.#count = 0;
    this.#loggedCount = 0;
  }
}
